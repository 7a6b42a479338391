-- Chunks started but abandoned (lease expired, no answers, payload still there) that were
-- not re-queued since their last start: marks them re-queued and returns their indexes.
-- KEYS[1] attempts   KEYS[2] answers   KEYS[3] requeued
-- ARGV[1] prefix of the job's lease keys   ARGV[2] prefix of its payload keys
-- (keys.lease_prefix and keys.chunk_input_prefix: a chunk's key is the prefix and its index)
local found = {}
local entries = redis.call('HGETALL', KEYS[1])
for j = 1, #entries, 2 do
  local i, n = entries[j], entries[j + 1]
  if redis.call('HEXISTS', KEYS[2], i) == 0
      and redis.call('EXISTS', ARGV[1] .. i) == 0
      and redis.call('EXISTS', ARGV[2] .. i) == 1
      and redis.call('HGET', KEYS[3], i) ~= n then
    redis.call('HSET', KEYS[3], i, n)
    table.insert(found, tonumber(i))
  end
end
return found
