-- Count a run of a chunk and take its lease; records the job's first start on the Redis
-- clock. Returns the attempt number, or -1 when the job is gone or cancelled.
-- KEYS[1] manifest   KEYS[2] attempts   KEYS[3] lease
-- ARGV[1] chunk index   ARGV[2] holder (host:pid)   ARGV[3] lease seconds
local state = redis.call('HGET', KEYS[1], 'state')
if state == false or state == 'cancelled' then return -1 end
local attempt = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
local t = redis.call('TIME')
redis.call('HSETNX', KEYS[1], 'started', t[1] .. '.' .. string.format('%06d', t[2]))
redis.call('SET', KEYS[3], ARGV[2], 'EX', ARGV[3])
return attempt
