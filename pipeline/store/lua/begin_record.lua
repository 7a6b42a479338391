-- Mark a record begun (its runner took it), unless it has ended (cancelled while it waited)
-- or is gone. Returns 1, or 0 when nothing was written.
-- KEYS[1] record
-- ARGV[1] n, the number of finished states   ARGV[2..1+n] those states
-- ARGV[2+n..] field, value, ...
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return 0 end
local n = tonumber(ARGV[1])
for i = 2, 1 + n do
  if ARGV[i] == state then return 0 end
end
redis.call('HSET', KEYS[1], unpack(ARGV, 2 + n))
return 1
