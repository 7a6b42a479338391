-- A producer gives its job up (it read a bad or changing input, or failed): a job whose chunk
-- plan is not final is removed with everything it holds (no answers of unverified bytes are
-- kept); a job with a final plan (another run produced it) only loses its producer. With an
-- empty token, a sweep removes an orphan: a job of `solve` or `submit` still producing that
-- no producer holds (its producer died, its claim lapsed), which no collector could finish.
-- Returns 1 when the job was removed (its payload and lease keys are the caller's to remove),
-- 0 otherwise.
-- KEYS[1] producer   KEYS[2] manifest   KEYS[3] every job   KEYS[4] open jobs
-- KEYS[5..] the job's per-chunk keys
-- ARGV[1] token   ARGV[2] job id
local holder = redis.call('GET', KEYS[1])
if ARGV[1] == '' then
  -- a verdict job (comparing, judging: it has a kind) has no claims: never an orphan
  if holder or redis.call('HEXISTS', KEYS[2], 'kind') == 1 then return 0 end
elseif holder ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if redis.call('HGET', KEYS[2], 'state') ~= 'producing' then return 0 end
redis.call('DEL', KEYS[2], unpack(KEYS, 5))
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
return 1
