--[[
  memory_delete: remove long-term memory items of one namespace (src/long_term.rs), and log
  each removal to the wal (the durable tier deletes its row even where Redis held none).
  KEYS[1] namespace hash     <prefix>:{p}:m:<namespace>
  KEYS[2] namespace set      <prefix>:{p}:memory_namespaces
  KEYS[3] expiry index       <prefix>:{p}:memory_expiry
  KEYS[4] wal stream         <prefix>:{p}:wal   (partition of the namespace)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] namespace (labels joined by '.')   ARGV[2..] item keys
  ARGV[2] '' with no further key is refused (BAD_INPUT): name the item.
  Returns: the wal entry id of the last removal
]]
-- @include unchecked, fail
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
if #ARGV < 2 or #KEYS ~= 5 then
  return fail('BAD_INPUT', 'memory_delete takes 5 keys, a namespace and item keys')
end
local id
for i = 2, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[3], ARGV[1] .. '\n' .. ARGV[i])
  id = redis.call('XADD', KEYS[4], '*', 'op', 'mem_del', 'id', ARGV[1], 'd',
    cjson.encode({key = ARGV[i]}))
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[1])
end
return id
