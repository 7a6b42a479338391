-- Store a chunk's payload for its job's one producer. A payload of other bytes than the
-- chunk had drops the answers of those (they answer other cases), unless the job's chunk
-- plan is final: then the producer read other bytes than the job's, and nothing is written.
-- A final plan that has lost a chunk's digest (Redis lost data) is produced again: the job
-- is producing until this producer, having checked every byte it read, finishes it.
-- A chunk that had failed starts afresh: its failure ended its runs (none died), so neither
-- their count nor a careful run (case by case) carries over.
-- Returns 1 when stored, -1 when the caller is no longer the job's producer (or the job is
-- gone or cancelled), -2 when the plan is final and the chunk's digest differs.
-- KEYS[1] manifest   KEYS[2] payload   KEYS[3] sums   KEYS[4] answers   KEYS[5] producer
-- KEYS[6] errors   KEYS[7] attempts   KEYS[8] requeued   KEYS[9] cursor
-- ARGV[1] chunk index   ARGV[2] payload   ARGV[3] its digest   ARGV[4] producer token
if redis.call('GET', KEYS[5]) ~= ARGV[4] then return -1 end
local state = redis.call('HGET', KEYS[1], 'state')
if state == false or state == 'cancelled' then return -1 end
local old = redis.call('HGET', KEYS[3], ARGV[1])
if old ~= ARGV[3] then
  if state ~= 'producing' then
    if old then return -2 end
    redis.call('HSET', KEYS[1], 'state', 'producing')
  end
  local codes = redis.call('HGET', KEYS[4], ARGV[1])
  if codes then
    redis.call('HDEL', KEYS[4], ARGV[1])
    redis.call('HINCRBY', KEYS[1], 'done_chunks', -1)
    redis.call('HINCRBY', KEYS[1], 'done_cases', -string.len(codes))
  end
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
end
if redis.call('HDEL', KEYS[6], ARGV[1]) == 1 then
  for k = 7, 9 do redis.call('HDEL', KEYS[k], ARGV[1]) end
end
redis.call('SET', KEYS[2], ARGV[2])
return 1
