--[[
  replace_memory: a rollback repair's write of one long-term memory namespace: its hash
  becomes exactly the durable tier's items (none: the namespace goes), with its entries in the
  namespace set and the expiry index, since Redis came back behind what the durable tier
  committed. Runs while the partition is closed to agents' writes (unchecked in _prelude);
  only the partition's lease holder writes.
  KEYS[1] namespace hash     <prefix>:{p}:m:<namespace>
  KEYS[2] namespace set      <prefix>:{p}:memory_namespaces
  KEYS[3] expiry index       <prefix>:{p}:memory_expiry
  KEYS[4] lease              <prefix>:{p}:lease
  ARGV[1] the caller's lease value "<owner> <token>"
  ARGV[2] namespace
  ARGV[3..] (key, record) pairs, records as memory_put.lua writes them
  Returns: the number of items written, or -1 when the caller no longer holds the lease
]]
-- @include bad_argc
local bad_args = bad_argc(2, 2)
if bad_args then
  return bad_args
end
if redis.call('GET', KEYS[4]) ~= ARGV[1] then
  return -1
end
local ns = ARGV[2]
for _, key in ipairs(redis.call('HKEYS', KEYS[1])) do
  redis.call('ZREM', KEYS[3], ns .. '\n' .. key)
end
redis.call('DEL', KEYS[1])
if #ARGV < 3 then
  redis.call('SREM', KEYS[2], ns)
  return 0
end
for i = 3, #ARGV, 2 do
  local key, record = ARGV[i], ARGV[i + 1]
  redis.call('HSET', KEYS[1], key, record)
  local expires = tonumber(string.match(record, '"expires_at":(%d+),'))
  if expires then
    redis.call('ZADD', KEYS[3], expires, ns .. '\n' .. key)
  end
end
redis.call('SADD', KEYS[2], ns)
return (#ARGV - 2) / 2
