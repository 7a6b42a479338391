-- Renews the lifetime of every key that exists; says which do, one character per key.
-- KEYS: the keys   ARGV[1] their lifetime in seconds
local found = {}
for i, key in ipairs(KEYS) do
  found[i] = redis.call('EXPIRE', key, ARGV[1]) == 1 and '1' or '0'
end
return table.concat(found)
