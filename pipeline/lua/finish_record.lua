-- End the HTTP service's record of a job, unless it was removed meanwhile (a refused upload):
-- a finished job must never bring back a record. Returns 1, or 0 without a record.
-- KEYS[1] record   KEYS[2] the server's pending set   KEYS[3] the count of cases solved
-- ARGV[1] job id   ARGV[2] cases solved by it   ARGV[3..] field, value, ...
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('INCRBY', KEYS[3], ARGV[2])
return 1
