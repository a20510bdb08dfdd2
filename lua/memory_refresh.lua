--[[
  memory_refresh: move the expiry of long-term memory items that were just read to now + their
  TTL (LangGraph's refresh_ttl; src/long_term.rs). An item without a TTL, absent, or already
  expired by this script's clock stays as it is. Each refresh is logged as a `mem_put`
  reference, so the durable row gets the new expiry.
  KEYS[1] namespace hash     <prefix>:{p}:m:<namespace>
  KEYS[2] namespace set      <prefix>:{p}:memory_namespaces
  KEYS[3] expiry index       <prefix>:{p}:memory_expiry
  KEYS[4] wal stream         <prefix>:{p}:wal
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] namespace          ARGV[2..] item keys
  Returns: {wal entry id or '', {new expiry in ms, or 0, for each key in order}}
]]
-- @include unchecked, fail, now_ms
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
if #KEYS ~= 5 or #ARGV < 2 then
  return fail('BAD_INPUT', 'memory_refresh takes 5 keys, a namespace and item keys')
end
local now = now_ms()
local id = ''
local expiries = {}
for i = 2, #ARGV do
  local at = 0
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  local ttl = old and string.match(old, '"ttl":(%d+),"value":')
  local head, expires = nil, nil
  if ttl then
    head, expires = string.match(old, '^({"created_at":%d+,"updated_at":%d+,"expires_at":)(%d+)')
  end
  if expires and tonumber(expires) > now then
    at = now + tonumber(ttl) * 60000
    local text = string.format('%d', at)
    redis.call('HSET', KEYS[1], ARGV[i], head .. text .. string.sub(old, #head + #expires + 1))
    redis.call('ZADD', KEYS[3], at, ARGV[1] .. '\n' .. ARGV[i])
    id = redis.call('XADD', KEYS[4], '*', 'op', 'mem_put', 'id', ARGV[1], 'd',
      cjson.encode({key = ARGV[i]}))
  end
  expiries[#expiries + 1] = at
end
return {id, expiries}
