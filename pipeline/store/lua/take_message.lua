-- Take back a task message that no worker has taken yet: the newest message of a queue, when
-- it is the message of one of the given tasks. Returns that task's id, or false.
-- KEYS: the queues (kombu's Redis lists: messages are pushed on the left, workers pop them
-- on the right, so the newest is the last one a worker would take)
-- ARGV: task ids (each a random UUID, found in its message's headers)
for _, queue in ipairs(KEYS) do
  local newest = redis.call('LINDEX', queue, 0)
  if newest then
    for _, id in ipairs(ARGV) do
      if string.find(newest, id, 1, true) then
        redis.call('LPOP', queue)
        return id
      end
    end
  end
end
return false
