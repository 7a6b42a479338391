-- Record the chunk plan once every chunk is queued, unless the job is gone (Redis lost its
-- data while the input was read): then nothing is written. Returns 1, or 0 without a job.
-- KEYS[1] manifest
-- ARGV[1] chunks   ARGV[2] total cases   ARGV[3] the running state
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'chunks', ARGV[1], 'total', ARGV[2], 'state', ARGV[3])
return 1
