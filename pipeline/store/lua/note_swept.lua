-- Keeps the sweep's open set to the unfinished jobs: adds those the sweep found unfinished
-- unless one has finished since it looked (its manifest gone or no longer in ARGV[3] or
-- ARGV[4]: re-adding it would keep it open until the next round), drops the finished.
-- KEYS[1] the open set   KEYS[2..n+1] the manifests of the n unfinished jobs
-- ARGV[1] now   ARGV[2] n   ARGV[3], ARGV[4] the unfinished states
-- ARGV[5..n+4] the unfinished job ids   ARGV[n+5..] the finished job ids
local n = tonumber(ARGV[2])
for i = 1, n do
  local state = redis.call('HGET', KEYS[i + 1], 'state')
  if state == ARGV[3] or state == ARGV[4] then
    redis.call('ZADD', KEYS[1], 'NX', ARGV[1], ARGV[i + 4])
  end
end
for i = n + 5, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
end
return 0
