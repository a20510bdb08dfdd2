--[[
  read_working: read one working-state value or all of them, with the version (read-only).
  KEYS[1] meta hash            <prefix>:{p}:s:<sid>
  KEYS[2] working state hash   <prefix>:{p}:s:<sid>:work
  ARGV[1] session id (for the error)
  ARGV[2] key, or '' for all keys
  Returns: {version, value or false} for one key; {version, {k1, v1, k2, v2, ...}} for all
  Errors:  NO_SESSION
]]
-- @include fail, bad_argc
local bad_args = bad_argc(2)
if bad_args then
  return bad_args
end
-- next_seq: every session has it; version is absent while 0 (META_DEFAULTS in _prelude)
local meta = redis.call('HMGET', KEYS[1], 'next_seq', 'version')
if not meta[1] then
  return fail('NO_SESSION', ARGV[1])
end
local version = tonumber(meta[2] or 0)
if ARGV[2] == '' then
  return {version, redis.call('HGETALL', KEYS[2])}
end
return {version, redis.call('HGET', KEYS[2], ARGV[2])}
