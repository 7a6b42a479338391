-- Create a job's manifest unless it exists, all fields at once (two producers of the same
-- input never see half a manifest), and list the job; returns the manifest in force.
-- KEYS[1] manifest   KEYS[2] every job (zset)   KEYS[3] jobs not seen finished (zset)
-- ARGV[1] the job id   ARGV[2] its score (creation time)   ARGV[3..] field, value, ...
if redis.call('EXISTS', KEYS[1]) == 0 then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'created', t[1] .. '.' .. string.format('%06d', t[2]),
             unpack(ARGV, 3))
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
end
return redis.call('HGETALL', KEYS[1])
