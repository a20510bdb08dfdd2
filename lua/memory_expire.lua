--[[
  memory_expire: the spill daemon's removal of one namespace's long-term memory items whose
  TTL ran out (src/spill/expiry.rs): each named item goes only if its moment in the expiry
  index has passed by this script's clock, so an item put again since with a new TTL stays.
  Each removal is logged as a `mem_del`, which deletes the durable row.
  KEYS[1] namespace hash     <prefix>:{p}:m:<namespace>
  KEYS[2] namespace set      <prefix>:{p}:memory_namespaces
  KEYS[3] expiry index       <prefix>:{p}:memory_expiry
  KEYS[4] wal stream         <prefix>:{p}:wal
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] namespace          ARGV[2..] item keys
  Returns: the number of items removed
]]
-- @include unchecked, fail, now_ms
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
if #KEYS ~= 5 or #ARGV < 2 then
  return fail('BAD_INPUT', 'memory_expire takes 5 keys, a namespace and item keys')
end
local now = now_ms()
local removed = 0
for i = 2, #ARGV do
  local member = ARGV[1] .. '\n' .. ARGV[i]
  local at = redis.call('ZSCORE', KEYS[3], member)
  if at and tonumber(at) <= now then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[3], member)
    redis.call('XADD', KEYS[4], '*', 'op', 'mem_del', 'id', ARGV[1], 'd',
      cjson.encode({key = ARGV[i]}))
    removed = removed + 1
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[1])
end
return removed
