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
local version = redis.call('HGET', KEYS[1], 'version')
if not version then
  return fail('NO_SESSION', ARGV[1])
end
if ARGV[2] == '' then
  return {tonumber(version), redis.call('HGETALL', KEYS[2])}
end
return {tonumber(version), redis.call('HGET', KEYS[2], ARGV[2])}
