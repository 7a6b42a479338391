-- Record the chunk plan once every chunk is queued, unless the job is gone (Redis lost its
-- data while the input was read), was cancelled meanwhile, or has another producer now (this
-- one stalled past its lease): then nothing is written.
-- Returns 1, 0 without a job (or for a producer that is no longer the job's), 2 for a
-- cancelled job.
-- KEYS[1] manifest   KEYS[2] producer
-- ARGV[1] chunks   ARGV[2] total cases   ARGV[3] the running state   ARGV[4] the cancelled state
-- ARGV[5] the producer's token (empty: a comparison job, which has no producer key)
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'state') == ARGV[4] then return 2 end
if ARGV[5] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[5] then return 0 end
redis.call('HSET', KEYS[1], 'chunks', ARGV[1], 'total', ARGV[2], 'state', ARGV[3])
return 1
