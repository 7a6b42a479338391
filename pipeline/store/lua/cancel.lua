-- Cancel a job in one step: its manifest and, when the HTTP service holds it, its record and
-- an event. Returns {1, ''} when it cancelled the job, {1, STATE} when the job had ended
-- already in STATE (nothing is written), {0, ''} when there is no such job.
-- KEYS[1] manifest   KEYS[2] open jobs   KEYS[3] HTTP record   KEYS[4] event stream
-- KEYS[5..] the job's per-chunk keys (answers, errors, sums, ...)
-- ARGV[1] job id   ARGV[2] ttl   ARGV[3] now   ARGV[4] event body   ARGV[5] event cap
-- ARGV[6] the pending-set key without its server   ARGV[7..] the finished states
local finished = {}
for i = 7, #ARGV do finished[ARGV[i]] = true end
local job = redis.call('HGET', KEYS[1], 'state')
local record = redis.call('HGET', KEYS[3], 'state')
if not job and not record then return {0, ''} end
-- an uploaded job's record is its truth (its manifest may not exist yet, or be done while
-- the result is still written); a job of the command line has only its manifest
local now = record or job
if finished[now] then return {1, now} end
if job then
  redis.call('HSET', KEYS[1], 'state', 'cancelled')
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('DEL', unpack(KEYS, 5))
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
if record then
  redis.call('HSET', KEYS[3], 'state', 'cancelled', 'finished', ARGV[3])
  local server = redis.call('HGET', KEYS[3], 'server')
  if server then redis.call('SREM', ARGV[6] .. server, ARGV[1]) end
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'data', ARGV[4])
end
return {1, ''}
