-- Count what a judging chunk did on its job's manifest: the program is ready (counted once
-- per job, and as a compile error when it did not compile), cases run and verdicts kept.
-- A job that is gone is left gone (no counter recreates its manifest).
-- KEYS[1] manifest
-- ARGV[1] program key   ARGV[2] 1 when it did not compile   ARGV[3] cases run   ARGV[4] kept
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HSETNX', KEYS[1], 'program:' .. ARGV[1], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'programs_ready', 1)
  if ARGV[2] == '1' then redis.call('HINCRBY', KEYS[1], 'programs_failed', 1) end
end
redis.call('HINCRBY', KEYS[1], 'cases_run', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'cases_kept', ARGV[4])
return 1
