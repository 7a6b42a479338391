-- Mark a collected job done and let its keys expire, but only where every chunk has its
-- answers: a primary that a failover left without some of them (or without the job) is not
-- told the job is done; those chunks are solved again. A job done already only has its
-- expiry set again (idempotent).
-- Returns 1 when the job is done here, 0 when it is not complete here.
-- KEYS[1] manifest   KEYS[2] open jobs   KEYS[3..] the job's other keys
-- ARGV[1] the done state   ARGV[2] the running state   ARGV[3] now   ARGV[4] ttl
-- ARGV[5] the job id
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= ARGV[1] then
  if state ~= ARGV[2] then return 0 end
  local chunks = redis.call('HGET', KEYS[1], 'chunks')
  local answered = redis.call('HGET', KEYS[1], 'done_chunks') or '0'
  if not chunks or tonumber(answered) ~= tonumber(chunks) then return 0 end
  redis.call('HSET', KEYS[1], 'state', ARGV[1], 'finished', ARGV[3])
end
for i = 1, #KEYS do
  if i ~= 2 then redis.call('EXPIRE', KEYS[i], ARGV[4]) end
end
redis.call('ZREM', KEYS[2], ARGV[5])
return 1
