--[[
  bind_namespace: bind the namespace to one durable tier. The first spill daemon records its
  tier's identity (and where that tier is, for people); every later daemon learns which tier
  the namespace is bound to, and runs only on that one. Redis losing its data loses the
  binding too: the first daemon to come back binds it again.
  KEYS[1] namespace config hash   <prefix>:config
  ARGV[1] the caller's durable tier identity (hex digits)
  ARGV[2] where that tier is, for messages (an absolute path, or a URL without password)
  Returns: {identity, location} of the tier the namespace is bound to after the call (the
  caller's when it was unbound)
  Errors:  BAD_INPUT (an identity that is not 1-64 hex digits; checked before any write)
]]
-- @include fail, bad_argc
local bad_args = bad_argc(2)
if bad_args then
  return bad_args
end
if not string.find(ARGV[1], '^%x+$') or #ARGV[1] > 64 then
  return fail('BAD_INPUT', 'a durable tier identity is 1-64 hex digits')
end
local bound = redis.call('HMGET', KEYS[1], 'durable', 'durable_at')
if bound[1] then
  return {bound[1], bound[2] or ''}
end
redis.call('HSET', KEYS[1], 'durable', ARGV[1], 'durable_at', ARGV[2])
return {ARGV[1], ARGV[2]}
