-- Record the chunk plan once every chunk is queued, unless the job is gone (Redis lost its
-- data while the input was read) or was cancelled meanwhile: then nothing is written.
-- Returns 1, 0 without a job, 2 for a cancelled job.
-- KEYS[1] manifest
-- ARGV[1] chunks   ARGV[2] total cases   ARGV[3] the running state   ARGV[4] the cancelled state
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'state') == ARGV[4] then return 2 end
redis.call('HSET', KEYS[1], 'chunks', ARGV[1], 'total', ARGV[2], 'state', ARGV[3])
return 1
