--[[
  lease_acquire: take a session's run lease for `owner` if it is free, expired, or already
  that owner's, and return its fencing token. Leases are live only: no wal record (a Redis
  that lost its data lost its leases, and a token never comes back smaller, see below).
  The lease is three meta fields: lease_owner ('' once released), lease_token, lease_until
  (ms). A new holder's token is the Redis clock in ms, or one more than the previous token
  when that is larger: it grows on every change of holder, also after Redis lost the old
  one. The same owner acquiring again keeps its token and extends the lease.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   inbox hash      <prefix>:{p}:s:<sid>:inbox
  KEYS[11]   effect ledger   <prefix>:{p}:s:<sid>:effects
  ARGV[1] session id   ARGV[2] owner   ARGV[3] lease TTL, ms
  Returns: {token, expires_at (ms)} as text
  Errors:  NO_SESSION, BAD_INPUT (a TTL that is not a whole number of ms, an empty owner),
           LEASED <holder> <token> <expires_at> while another owner's lease runs
  Atomic: every check runs before the first write.
]]
-- @include clock, fail, open_session, bad_lease_ttl, touch_run
local meta, bad = open_session(3, nil, 'ttl', 'ttl_at', 'lease_owner', 'lease_token',
  'lease_until')
if bad then
  return bad
end
bad = bad_lease_ttl(ARGV[3])
if bad then
  return bad
end
if ARGV[2] == '' then
  return fail('BAD_INPUT', 'a lease needs an owner')
end
local now, now_text = clock()
local owner, token, held_until = meta[3], meta[4], tonumber(meta[5] or '0')
if owner and owner ~= '' and owner ~= ARGV[2] and held_until > now then
  return fail('LEASED', owner .. ' ' .. token .. ' ' .. meta[5])
end
if owner ~= ARGV[2] then
  token = string.format('%d', math.max((tonumber(token) or 0) + 1, now))
end
local expires = string.format('%d', now + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'lease_owner', ARGV[2], 'lease_token', token, 'lease_until', expires)
touch_run(meta[1], now, meta[2])
return {token, expires}
