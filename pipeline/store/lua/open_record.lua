-- Open the HTTP service's record of an upload, unless an unfinished or finished-well record
-- of the same content exists (uploads are idempotent). Returns 1 when opened, else 0.
-- KEYS[1] record   KEYS[2] listing zset   KEYS[3] the server's pending set
-- ARGV[1] score (upload time)   ARGV[2] job id   ARGV[3] 1: replace a finished record
-- ARGV[4..] field, value, ...
local state = redis.call('HGET', KEYS[1], 'state')
if state and state ~= 'failed' and state ~= 'cancelled' then
  if not (ARGV[3] == '1' and state == 'done') then return 0 end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[2])
return 1
