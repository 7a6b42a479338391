-- Begin a run of a chunk in one round trip: its payload and that payload's digest, a counted
-- attempt and its lease; records the job's first start on the Redis clock. Returns
-- {attempt, payload, digest}, or {0} when the chunk has its answers already, or {-1} when it
-- or its job is gone or cancelled.
-- KEYS[1] manifest   KEYS[2] attempts   KEYS[3] lease   KEYS[4] payload   KEYS[5] answers
-- KEYS[6] sums
-- ARGV[1] chunk index   ARGV[2] holder (host:pid)   ARGV[3] lease seconds
local state = redis.call('HGET', KEYS[1], 'state')
if state == false or state == 'cancelled' then return {-1} end
local payload = redis.call('GET', KEYS[4])
if payload == false then
  if redis.call('HEXISTS', KEYS[5], ARGV[1]) == 1 then return {0} end
  return {-1}
end
local attempt = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
local t = redis.call('TIME')
redis.call('HSETNX', KEYS[1], 'started', t[1] .. '.' .. string.format('%06d', t[2]))
redis.call('SET', KEYS[3], ARGV[2], 'EX', ARGV[3])
return {attempt, payload, redis.call('HGET', KEYS[6], ARGV[1]) or ''}
