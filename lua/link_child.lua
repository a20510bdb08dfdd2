--[[
  link_child: add or remove a sub-agent id in its parent's children set.
  KEYS[1..9] the parent's session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] 'add' or 'remove'
  ARGV[2] child session id
  Returns: 1 when the parent is live, 0 when removing from a parent that is gone
  Errors:  NO_SESSION when adding to a parent that is not live
  Atomic: the parent's existence is checked before the first write.
]]
-- @include unchecked, now_ms, fail, refresh_ttl, bad_argc
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(2)
if bad_args then
  return bad_args
end
local meta = redis.call('HMGET', KEYS[1], 'ttl', 'ttl_at')
if not meta[1] then
  if ARGV[1] == 'add' then return fail('NO_SESSION', 'parent') end
  return 0
end
local created = nil
if ARGV[1] == 'add' then
  if redis.call('SADD', KEYS[8], ARGV[2]) == 1 then
    created = {8}
  end
else
  redis.call('SREM', KEYS[8], ARGV[2])
end
refresh_ttl(KEYS, meta[1], now_ms(), meta[2], created)
return 1
