--[[
  lease_release: drop a session's run lease, only for the owner holding it with `token`.
  The token stays (lease_token), so the next holder's is larger; lease_owner becomes ''.
  Live only: no wal record.
  KEYS[1..9] session keys (see _prelude)
  ARGV[1] session id   ARGV[2] owner   ARGV[3] token
  Returns: 1 when released, 0 when the owner did not hold it with that token
  Errors:  NO_SESSION
]]
-- @include open_session
local meta, bad = open_session(3, nil, 'ttl', 'lease_owner', 'lease_token')
if bad then
  return bad
end
if meta[2] ~= ARGV[2] or meta[3] ~= ARGV[3] or ARGV[2] == '' then
  return 0
end
redis.call('HSET', KEYS[1], 'lease_owner', '', 'lease_until', 0)
return 1
