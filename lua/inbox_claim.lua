--[[
  inbox_claim: the run lease holder takes the inbox items it is to deliver: pending ones,
  ones claimed under an older token (their holder lost the lease: died or was taken over)
  and ones it claimed already (a repeated claim returns them again), oldest first.
  Claims are live only (no wal record): after a Redis loss a restored item is pending.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   inbox hash      <prefix>:{p}:s:<sid>:inbox
  KEYS[11]   effect ledger   <prefix>:{p}:s:<sid>:effects
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id   ARGV[2] owner   ARGV[3] token   ARGV[4] at most this many items
  Returns: the claimed items (inbox_item text, state `claimed`), oldest first
  Errors:  NO_SESSION, FENCED (the owner does not hold the lease with that token),
           BAD_INPUT (a limit that is not a whole number from 1), RUN_GONE (see run_gone in
           _prelude)
  Atomic: every check runs before the first write.
]]
-- @include unchecked, clock, fail, open_session, not_holder, inbox_header, inbox_item, touch_run
-- @include run_gone
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(4, nil, 'ttl', 'ttl_at', 'run_keys')
if bad then
  return bad
end
local limit = tonumber(ARGV[4])
if not limit or limit < 1 or limit ~= math.floor(limit) then
  return fail('BAD_INPUT', 'claim limit must be a whole number from 1')
end
bad = not_holder(KEYS, ARGV[2], ARGV[3]) or run_gone(KEYS, meta[3])
if bad then
  return bad
end
local all = redis.call('HGETALL', KEYS[10])
local open = {}
for i = 1, #all, 2 do
  local n, state, token, _, put_at, body = inbox_header(all[i + 1])
  if n and (state == 'pending' or state == 'claimed') then
    open[#open + 1] = {tonumber(n), all[i], put_at, body, token}
  end
end
table.sort(open, function(a, b) return a[1] < b[1] end)
local now = clock()
local claimed = {}
for i = 1, math.min(limit, #open) do
  local o = open[i]
  local item = inbox_item(o[2], o[1], 'claimed', ARGV[3], '', o[3], o[4])
  if o[5] ~= ARGV[3] then
    redis.call('HSET', KEYS[10], o[2], item)
  end
  claimed[i] = item
end
touch_run(meta[1], now, meta[2])
return claimed
