-- Record the chunk plan once every chunk is queued, unless the job is gone (Redis lost its
-- data while the input was read), was cancelled meanwhile, or has another producer now (this
-- one stalled past its lease): then nothing is written. Nor is it when a chunk of the plan
-- has no digest: its payload was written to a primary that a failover lost before any
-- replica had it, and no worker could ever take it (the producer reads its input again).
-- Returns 1, 0 without a job (or for a producer that is no longer the job's, or with a
-- chunk lost), 2 for a cancelled job.
-- The errors of invalid cases this producer found become the job's at the same moment.
-- KEYS[1] manifest   KEYS[2] producer   KEYS[3] invalid cases   KEYS[4] this producer's
-- KEYS[5] sums
-- ARGV[1] chunks   ARGV[2] total cases   ARGV[3] the running state   ARGV[4] the cancelled state
-- ARGV[5] the producer's token (empty: a comparison job, which has no producer key)
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'state') == ARGV[4] then return 2 end
if ARGV[5] ~= '' then
  if redis.call('GET', KEYS[2]) ~= ARGV[5] then return 0 end
  local chunks = tonumber(ARGV[1])
  if redis.call('HLEN', KEYS[5]) < chunks then return 0 end
  for index = 0, chunks - 1 do
    if redis.call('HEXISTS', KEYS[5], index) == 0 then return 0 end
  end
end
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
