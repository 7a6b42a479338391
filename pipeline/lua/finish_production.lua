-- Record the chunk plan once every chunk is queued, unless the job is gone (Redis lost its
-- data while the input was read), was cancelled meanwhile, or has another producer now (this
-- one stalled past its lease): then nothing is written.
-- Returns 1, 0 without a job (or for a producer that is no longer the job's), 2 for a
-- cancelled job.
-- The errors of invalid cases this producer found become the job's at the same moment.
-- KEYS[1] manifest   KEYS[2] producer   KEYS[3] invalid cases   KEYS[4] this producer's
-- ARGV[1] chunks   ARGV[2] total cases   ARGV[3] the running state   ARGV[4] the cancelled state
-- ARGV[5] the producer's token (empty: a comparison job, which has no producer key)
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'state') == ARGV[4] then return 2 end
if ARGV[5] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[5] then return 0 end
redis.call('HSET', KEYS[1], 'chunks', ARGV[1], 'total', ARGV[2], 'state', ARGV[3])
if ARGV[5] ~= '' then
  if redis.call('EXISTS', KEYS[4]) == 1 then
    redis.call('RENAME', KEYS[4], KEYS[3])
    redis.call('PERSIST', KEYS[3])
  else
    redis.call('DEL', KEYS[3])
  end
end
return 1
