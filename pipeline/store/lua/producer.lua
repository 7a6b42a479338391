-- The job's one producer: claim (or renew) the producer key for a token, or give it up.
-- KEYS[1] producer
-- ARGV[1] token   ARGV[2] "claim", "renew" or "release"   ARGV[3] lease in milliseconds
-- Returns 1 when the token holds the key afterwards ("release": when it held it), else 0.
local holder = redis.call('GET', KEYS[1])
if ARGV[2] == 'release' then
  if holder == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
  return 0
end
if holder == ARGV[1] or (holder == false and ARGV[2] == 'claim') then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  return 1
end
return 0
