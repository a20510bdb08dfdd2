--[[
  link_child: add or remove a sub-agent id in its parent's children set.
  KEYS[1..9] the parent's session keys (see _prelude)
  ARGV[1] 'add' or 'remove'
  ARGV[2] child session id
  Returns: 1 when the parent is live, 0 when removing from a parent that is gone
  Errors:  NO_SESSION when adding to a parent that is not live
  Atomic: the parent's existence is checked before the first write.
]]
local ttl = redis.call('HGET', KEYS[1], 'ttl')
if not ttl then
  if ARGV[1] == 'add' then return fail('NO_SESSION', 'parent') end
  return 0
end
if ARGV[1] == 'add' then
  redis.call('SADD', KEYS[8], ARGV[2])
else
  redis.call('SREM', KEYS[8], ARGV[2])
end
touch_session(tonumber(ttl))
return 1
