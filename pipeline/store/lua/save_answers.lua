-- Store a chunk's answers once, with the job's "done" counters: a duplicate run of the
-- chunk changes nothing, nor does a run of a payload that its producer replaced since (its
-- digest is no longer the chunk's). Returns 1 when stored, 0 for a duplicate or a replaced
-- payload, -1 when the job is gone or cancelled.
-- KEYS[1] manifest   KEYS[2] answers   KEYS[3] payload   KEYS[4] attempts
-- KEYS[5] cursor     KEYS[6] lease      KEYS[7] details   KEYS[8] sums
-- ARGV[1] chunk index   ARGV[2] answer codes, one byte per case
-- ARGV[3] details (a comparison chunk's mismatches as JSON), or empty
-- ARGV[4] the digest of the payload that was solved (empty for a comparison chunk)
if (redis.call('HGET', KEYS[8], ARGV[1]) or '') ~= ARGV[4] then return 0 end
redis.call('DEL', KEYS[3], KEYS[6])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
local state = redis.call('HGET', KEYS[1], 'state')
if state == false or state == 'cancelled' then return -1 end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 1 then
  if ARGV[3] ~= '' then redis.call('HSET', KEYS[7], ARGV[1], ARGV[3]) end
  redis.call('HINCRBY', KEYS[1], 'done_chunks', 1)
  redis.call('HINCRBY', KEYS[1], 'done_cases', string.len(ARGV[2]))
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'answered', t[1] .. '.' .. string.format('%06d', t[2]))
  return 1
end
return 0
