--[[
  lease_renew: extend a session's run lease while `owner` still holds it with `token`
  (nobody acquired it since and it was not released; an expired lease nobody took is still
  its holder's). Live only: no wal record.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   inbox hash      <prefix>:{p}:s:<sid>:inbox
  KEYS[11]   effect ledger   <prefix>:{p}:s:<sid>:effects
  ARGV[1] session id   ARGV[2] owner   ARGV[3] token   ARGV[4] lease TTL, ms
  Returns: the new expires_at (ms) as text, or '' when the owner no longer holds the lease
           (the caller must stop its run)
  Errors:  NO_SESSION, BAD_INPUT (a TTL that is not a whole number of ms)
  Atomic: every check runs before the first write.
]]
-- @include clock, open_session, bad_lease_ttl, touch_run
local meta, bad = open_session(4, nil, 'ttl', 'ttl_at', 'lease_owner', 'lease_token')
if bad then
  return bad
end
bad = bad_lease_ttl(ARGV[4])
if bad then
  return bad
end
if meta[3] ~= ARGV[2] or meta[4] ~= ARGV[3] or ARGV[2] == '' then
  return ''
end
local now = clock()
local expires = string.format('%d', now + tonumber(ARGV[4]))
redis.call('HSET', KEYS[1], 'lease_until', expires)
touch_run(meta[1], now, meta[2])
return expires
