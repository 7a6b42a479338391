-- End the HTTP service's record of a job or grading, with its event, in one step, unless the
-- record has ended already (a cancel came first) or was removed (a refused upload): a state a
-- record ends in is never left. Returns 1, or 0 when nothing was written.
-- KEYS[1] record   KEYS[2] the server's pending set   KEYS[3] the count of cases solved
-- KEYS[4] event stream
-- ARGV[1] record id   ARGV[2] cases solved by it   ARGV[3] event body ('' for none)
-- ARGV[4] event cap   ARGV[5] n, the number of finished states   ARGV[6..5+n] those states
-- ARGV[6+n..] field, value, ...
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return 0 end
local n = tonumber(ARGV[5])
for i = 6, 5 + n do
  if ARGV[i] == state then return 0 end
end
redis.call('HSET', KEYS[1], unpack(ARGV, 6 + n))
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('INCRBY', KEYS[3], ARGV[2])
if ARGV[3] ~= '' then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'data', ARGV[3])
end
return 1
