--[[
  restore_session: rehydrate a session that is not live from its durable copy (built by the
  spill daemon from SQLite), in one atomic step; does nothing when the session is live.
  Working state comes back empty. Writes no wal entry (the data came from the wal).
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   partition session index   <prefix>:{p}:sessions
  KEYS[11]   user's session index      <prefix>:{p}:by_user:<uid> (unused when no user)
  KEYS[12]   open decisions hash       <prefix>:{p}:open_decisions
  KEYS[13]   inbox hash                <prefix>:{p}:s:<sid>:inbox
  KEYS[14]   effect ledger             <prefix>:{p}:s:<sid>:effects
  KEYS[15]   KEYS[10]'s buckets        <prefix>:{p}:sessions:buckets
  KEYS[16]   KEYS[11]'s buckets
  ARGV, read in order as sections (a count n, then its items):
    session id, user id or '', idle TTL (seconds),
    n meta fields  then n (field, value) pairs, in create_session's field order but for
                   `compacted`, which this script derives from the audit records; those
                   at their default are not written (set_meta in _prelude)
    n messages     then n stored message elements, seq 1..n
    n idem keys    then n (idempotency key, seq) pairs
    n compactions  then n audit records, oldest first
    n usage rows   then n (round index, usage JSON) pairs
    n labels       then n (label, latest checkpoint JSON) pairs
    n children     then n child session ids
    n decisions    then n (id, decision, rationale, planned action or '', meta JSON, created_at)
    n inbox items  then n (item id, item record) pairs (a claim is not kept: pending again)
    n effects      then n (tool call id, ledger record) pairs
  A live session whose inbox and ledger expired while it lived (run_gone in _prelude: meta
  `run_keys` set, KEYS[13] and KEYS[14] absent) gets those two back from their sections, and
  nothing else is written.
  Returns: 1 when restored, 2 when only a live session's inbox and ledger were put back, 0
           when the session was live already (nothing written)
  Errors:  BAD_INPUT (a section count or compaction record that does not fit; nothing written)
  Atomic: one script; the meta hash (what makes a session live) is written last.
]]
-- @include now_ms, fail, refresh_ttl, bad_argc, decision_record, merge_compacted, index_upgrade
-- @include index_add
-- @include set_meta
local bad_args = bad_argc(4, 1)
if bad_args then
  return bad_args
end
-- Checks every section count and the compaction records before the first write (the
-- arguments come from SQLite, but a bad count would otherwise walk past ARGV for ever).
do
  local pos = 4
  local ttl = tonumber(ARGV[3])
  if not ttl or ttl < 0 or ttl > 1099511627776 or ttl ~= math.floor(ttl) then
    return fail('BAD_INPUT', 'ttl must be a whole number of seconds')
  end
  for section, width in ipairs({2, 1, 2, 1, 2, 2, 1, 6, 2, 2}) do
    local n = tonumber(ARGV[pos])
    if not n or n < 0 or n ~= math.floor(n) or pos + n * width > #ARGV then
      return fail('BAD_INPUT', 'bad section count at ARGV[' .. pos .. ']')
    end
    if section == 4 then
      for i = pos + 1, pos + n do
        local ok, r = pcall(cjson.decode, ARGV[i])
        if not ok or type(r) ~= 'table' or not tonumber(r.from_seq) or not tonumber(r.to_seq) then
          return fail('BAD_INPUT', 'bad compaction record at ARGV[' .. i .. ']')
        end
      end
    end
    pos = pos + 1 + n * width
  end
end
local live = redis.call('HMGET', KEYS[1], 'ttl', 'ttl_at', 'run_keys')
if live[1] and (not live[3] or redis.call('EXISTS', KEYS[13], KEYS[14]) > 0) then
  return 0
end
local at = 1
local function take()
  local v = ARGV[at]
  at = at + 1
  return v
end
-- Reads a section of n items of `width` arguments each and writes it in chunks (Lua's
-- unpack is limited to a few thousand values).
local function section(width, write)
  local n = tonumber(take())
  local chunk = {}
  for _ = 1, n * width do
    chunk[#chunk + 1] = take()
    if #chunk >= 960 then
      write(chunk)
      chunk = {}
    end
  end
  if #chunk > 0 then write(chunk) end
end
local sid, user, ttl = take(), take(), tonumber(take())
local function skip() end
if live[1] then
  for _, width in ipairs({2, 1, 2, 1, 2, 2, 1, 6}) do
    section(width, skip)
  end
  section(2, function(c) redis.call('HSET', KEYS[13], unpack(c)) end)
  section(2, function(c) redis.call('HSET', KEYS[14], unpack(c)) end)
  -- the two expire with the session's keys, as every run script leaves them
  refresh_ttl(KEYS, live[1], now_ms(), live[2], {13, 14}, {13, 14})
  return 2
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[13],
  KEYS[14])
local meta = {}
section(2, function(c) for _, v in ipairs(c) do meta[#meta + 1] = v end end)
section(1, function(c) redis.call('RPUSH', KEYS[3], unpack(c)) end)
section(2, function(c) redis.call('HSET', KEYS[5], unpack(c)) end)
local compacted = ''
section(1, function(c)
  redis.call('RPUSH', KEYS[6], unpack(c))
  for _, record in ipairs(c) do
    local r = cjson.decode(record)
    compacted = merge_compacted(compacted, r.from_seq, r.to_seq)
  end
end)
meta[#meta + 1] = 'compacted'
meta[#meta + 1] = compacted
section(2, function(c) redis.call('HSET', KEYS[7], unpack(c)) end)
section(2, function(c) redis.call('HSET', KEYS[4], unpack(c)) end)
section(1, function(c) redis.call('SADD', KEYS[8], unpack(c)) end)
local n = tonumber(take())
for _ = 1, n do
  local id, decision, rationale, action, dmeta, created = take(), take(), take(), take(), take(), take()
  redis.call('HSETNX', KEYS[12], id, decision_record(id, sid, decision, rationale, action, dmeta, created))
end
local run_rows = false
section(2, function(c) redis.call('HSET', KEYS[13], unpack(c)); run_rows = true end)
section(2, function(c) redis.call('HSET', KEYS[14], unpack(c)); run_rows = true end)
if run_rows then
  meta[#meta + 1] = 'run_keys'
  meta[#meta + 1] = '1'
end
index_upgrade(KEYS[10], KEYS[15])
index_add(KEYS[10], KEYS[15], sid)
if user ~= '' then
  index_upgrade(KEYS[11], KEYS[16])
  index_add(KEYS[11], KEYS[16], sid)
end
set_meta(KEYS[1], meta)
refresh_ttl(KEYS, ttl, now_ms(), nil, nil, {13, 14})
return 1
