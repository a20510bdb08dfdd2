--[[
  _prelude: helpers prepended to the scripts that include them; not a script on its own.
  A script names the helpers its code uses on `-- @include a, b` lines after its header, and a
  helper those it uses on one in its comment; src/scripts/loader.rs prepends the named ones
  and theirs, in this file's order, and no other (every definition carried runs again on
  each call). A test fails on a name used but not included or included but not used.
  Session scripts receive the session's keys as KEYS[1..9], in this order:
    KEYS[1] meta hash          <prefix>:{p}:s:<sid>
    KEYS[2] working state hash <prefix>:{p}:s:<sid>:work
    KEYS[3] message list       <prefix>:{p}:s:<sid>:msgs
    KEYS[4] checkpoint hash    <prefix>:{p}:s:<sid>:ckpt
    KEYS[5] idempotency hash   <prefix>:{p}:s:<sid>:idem
    KEYS[6] compaction list    <prefix>:{p}:s:<sid>:compactions
    KEYS[7] usage hash         <prefix>:{p}:s:<sid>:usage
    KEYS[8] children set       <prefix>:{p}:s:<sid>:children
    KEYS[9] wal stream         <prefix>:{p}:wal
  Errors are returned as `CODE detail` replies; src/error.rs maps the codes. Every script
  answers BAD_INPUT to a wrong argument count (bad_argc) before anything else.
]]

-- Milliseconds since the epoch from the Redis clock, so skewed clients agree.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- now_ms() and its decimal text, for the write paths that store the moment: a Lua number
-- given to redis.call is formatted by libc's %.17g (and by %.14g when concatenated), several
-- times the cost of formatting it once here and passing the text.
-- @include now_ms
local function clock()
  local now = now_ms()
  return now, string.format('%d', now)
end

-- An error reply `CODE detail` (return it from the script's top level).
local function fail(code, detail)
  return redis.error_reply(code .. ' ' .. (detail or ''))
end

-- The sliding idle TTL with slack: the one TTL rule of every session script.
-- A session's keys k[1..8] all expire at one moment. A write refreshes them (absent keys
-- skipped) only once `ttl_at` (meta field, ms) has passed, and then sets
-- ttl_at = now + slack, slack = a tenth of the TTL: a busy session pays the eight
-- expiry commands once per slack instead of on every write. Keys this call may have created
-- have no TTL yet; unless the refresh is due they get the moment the others expire at
-- (ttl_at - slack + ttl). So right after any session script every key of the session
-- expires between ttl - slack and ttl from now. Every moment is an absolute PEXPIREAT
-- computed from `now` (the script's TIME): a relative EXPIRE counts from Redis' own clock
-- at the command, not from TIME, so keys given their expiry at different writes could
-- drift apart by whatever separated the two clocks each time (under load a test saw the
-- keys of one session 11 ms apart).
--   k        the session's keys (KEYS, or the slice of a batch)
--   ttl      the idle TTL, seconds (meta `ttl`), or nil: read here if a key gets a moment
--            (appends and working-state writes leave it unread: most of their calls
--            set none)
--   now      the script's now_ms()
--   due      meta `ttl_at` as read, as its decimal text or that number (nil/false: refresh
--            now — create, restore, touch, an older session without the field)
--   created  indexes into k of keys this call created or may have created (nil: none)
--   extra    indexes into k of the session's further keys this call was given (the graph
--            log's two, KEYS[10] and KEYS[11]): refreshed with the eight (nil: none)
local function refresh_ttl(k, ttl, now, due, created, extra)
  -- `due + 0`, not tonumber(due): one string-to-number conversion instead of two
  due = due and due + 0
  local refresh = not due or now >= due
  if not refresh and not created then
    return -- the common case of a busy session: no key gets a moment, the TTL stays unread
  end
  ttl = tonumber(ttl or redis.call('HGET', k[1], 'ttl'))
  local slack = math.floor(ttl * 100)
  if refresh then
    local at = now + ttl * 1000
    for i = 1, 8 do
      redis.call('PEXPIREAT', k[i], at)
    end
    for _, i in ipairs(extra or {}) do
      redis.call('PEXPIREAT', k[i], at)
    end
    redis.call('HSET', k[1], 'ttl_at', now + slack)
  else
    local at = due - slack + ttl * 1000
    for _, i in ipairs(created) do
      redis.call('PEXPIREAT', k[i], at)
    end
  end
end

-- The TTL rule (refresh_ttl) for a script given a session's graph log in KEYS[10] (values)
-- and KEYS[11] (index): they expire with the session's eight keys. They may be new in this
-- call, so between refreshes they get the others' expiry (two PEXPIREATs).
-- @include refresh_ttl
local function touch_graph(ttl, now, due)
  refresh_ttl(KEYS, ttl, now, due, {10, 11}, {10, 11})
end

-- A JSON string literal for s, or null when s is empty.
local function json_str_or_null(s)
  if s == nil or s == '' then return 'null' end
  return cjson.encode(s)
end

-- A JSON number for s, or null when s is empty.
local function json_num_or_null(s)
  if s == nil or s == '' then return 'null' end
  return tostring(tonumber(s))
end

-- The meta fields a session's hash leaves out while they hold their default, and those
-- defaults: a reader takes an absent field as its default (src/sessions.rs::META_DEFAULTS,
-- which a unit test checks against this table). A fresh root session's hash is then next_seq,
-- ttl, ttl_at, updated_at, created_at (and user_id): 184 B by MEMORY USAGE, against 392 B
-- with all twenty fields (BENCHMARKS.md, W8).
local META_DEFAULTS = {
  version = '0', user_id = '', kind = 'root', parent = '', spawn_depth = '0',
  lifecycle = 'ephemeral', status = 'active', model = '', system_prompt = '', config = '{}',
  metadata = '{}', round_index = '0', last_compact_seq = '0', pending = '', compacted = ''
}

-- Writes the meta field/value pairs `pairs` (a flat list; values as text) to the meta hash
-- `key`, leaving out those at their default (META_DEFAULTS). `clear`: the hash may hold a
-- field being set back to its default (update_session), which is deleted; a new hash
-- (create, restore) has none.
-- @include META_DEFAULTS
local function set_meta(key, pairs, clear)
  local set, unset = {}, {}
  for i = 1, #pairs, 2 do
    local field, value = pairs[i], pairs[i + 1]
    if META_DEFAULTS[field] == value then
      unset[#unset + 1] = field
    else
      set[#set + 1] = field
      set[#set + 1] = value
    end
  end
  if #set > 0 then
    redis.call('HSET', key, unpack(set))
  end
  if clear and #unset > 0 then
    redis.call('HDEL', key, unpack(unset))
  end
end

-- The error reply when ARGV does not hold `n` arguments (with `step`: `n` and then whole
-- groups of `step`, e.g. 2 for pairs); nil when it does. Every script checks its count
-- before its first write: a missing argument would otherwise fail only at the command that
-- reads it, after the writes before that command.
-- @include fail
local function bad_argc(n, step)
  local extra = #ARGV - n
  if extra < 0 or (step == nil and extra ~= 0) or (step and extra % step ~= 0) then
    return fail('BAD_INPUT', 'expected ' .. n .. (step and ' + ' .. step .. 'k' or '')
      .. ' arguments, got ' .. #ARGV)
  end
  return nil
end

-- The keys of the classic wal records of op `op` about subject `id` (their `d` is `{key}`)
-- among the entries of stream `wal` after id `after`, as a set; true as its second value when
-- a record of op `stop` about `id` is among them (nil for none). What a re-seed reads to
-- leave alone what agents changed in the new Redis since the durable rows were read.
local function keys_since(wal, after, id, op, stop)
  local found = {}
  for _, entry in ipairs(redis.call('XRANGE', wal, '(' .. after, '+')) do
    local f = entry[2]
    local eop, eid, d
    for i = 1, #f, 2 do
      if f[i] == 'op' then eop = f[i + 1] elseif f[i] == 'id' then eid = f[i + 1] elseif f[i] == 'd' then d = f[i + 1] end
    end
    if eid == id then
      if eop == op then
        found[cjson.decode(d).key] = true
      elseif stop and eop == stop then
        return found, true
      end
    end
  end
  return found, nil
end

-- What this script run saw of its Redis: `history`, the replication id `unchecked` found
-- current (made anew at every call, as the chunk and its locals are).
local SEEN = {}

-- The replication id of this Redis' history (INFO replication, master_replid): a promoted
-- replica and a restarted server start a new one.
local function replid()
  return string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
end

-- The NOT_DECIDED error reply naming `what` unless a spill daemon has checked this Redis
-- history's partition against the durable tier: `gate`, the partition's commit marker
-- <prefix>:{p}:committed, holds in `history` the replication id (replid) of the history the
-- daemon checked and repaired. A promoted replica and a restarted server start a new
-- replication id, so their writes wait until a daemon has put back what they lack: no seq,
-- version or id the durable tier committed is handed out again. nil when writes may go on
-- (and SEEN.history is the history). The check of every write script, before anything else;
-- one INFO a run, found in its text rather than parsed out of it (it is per call).
-- @include fail, SEEN
local function unchecked(gate, what)
  local history = redis.call('HGET', gate, 'history')
  if history and (history == SEEN.history or string.find(redis.call('INFO', 'replication'),
      'master_replid:' .. history .. '\r', 1, true)) then
    SEEN.history = history
    return nil
  end
  return fail('NOT_DECIDED', what)
end

-- A wal entry id as a durable caller waits on it: `<id>/<history>`, the first 12 digits of
-- the replication id of the Redis history it was written in (SEEN.history, which the
-- script's check found). Ids are unique within a history only: after a failover a new master
-- can hand out an id an old one gave a write it never received, so the caller takes a commit
-- as its own only in its history (`src/durability.rs`).
-- @include SEEN
local function tracked_id(id)
  return id .. '/' .. string.sub(SEEN.history, 1, 12)
end

-- The session's meta fields `...` (one HMGET of its meta hash KEYS[1]), or nil and the error
-- reply NO_SESSION <ARGV[1]> when the session does not exist (the first field named is one
-- every session has); with no field named, only whether it exists (EXISTS): {} or the error.
-- The check of every script on one session, before its first write.
-- @include fail
local function session_meta(...)
  if select('#', ...) == 0 then
    if redis.call('EXISTS', KEYS[1]) == 0 then
      return nil, fail('NO_SESSION', ARGV[1])
    end
    return {}
  end
  local meta = redis.call('HMGET', KEYS[1], ...)
  if not meta[1] then
    return nil, fail('NO_SESSION', ARGV[1])
  end
  return meta
end

-- The opening of a script on one session with no other check between the two: the argument
-- count (bad_argc(n, step)), then the session (session_meta(...)). Returns the meta fields,
-- or nil and the error reply to return.
-- @include bad_argc, session_meta
local function open_session(n, step, ...)
  local bad = bad_argc(n, step)
  if bad then
    return nil, bad
  end
  return session_meta(...)
end

-- The FENCED error reply when `fence` (a run lease token as text; '' for a write that
-- carries none) is not the session's current lease: another process acquired the lease
-- since, or its holder released it. nil when the write may go on. A lease that expired
-- without a successor still fences for its holder: nobody else can have written under it.
-- Detail: `<fence> <current token or 0> <current holder or ->`. Reads the meta hash k[1].
-- @include fail
local function fenced(k, fence)
  if fence == '' then
    return nil
  end
  local lease = redis.call('HMGET', k[1], 'lease_owner', 'lease_token')
  if lease[1] and lease[1] ~= '' and lease[2] == fence then
    return nil
  end
  local holder = (lease[1] and lease[1] ~= '') and lease[1] or '-'
  return fail('FENCED', fence .. ' ' .. (lease[2] or '0') .. ' ' .. holder)
end

-- The FENCED error reply unless `owner` holds the session's run lease with token `token`
-- (lease_owner and lease_token of the meta hash k[1]); nil when it does. What the inbox
-- scripts of the holder check (claim, deliver) before their first write.
-- @include fail, fenced
local function not_holder(k, owner, token)
  if token == '' then
    return fail('FENCED', '0 0 -')
  end
  local stale = fenced(k, token)
  if stale then
    return stale
  end
  if redis.call('HGET', k[1], 'lease_owner') ~= owner then
    return fail('FENCED', token .. ' ' .. token .. ' ' .. redis.call('HGET', k[1], 'lease_owner'))
  end
  return nil
end

-- The RUN_GONE error reply when the session's inbox and ledger (k[10], k[11]) expired while
-- the session stayed live: `marked` (meta `run_keys`, set when a run script created either)
-- is set, yet neither key exists. Appends do not refresh those keys (touch_run), so a session
-- kept alive by appends alone past its idle TTL loses them from Redis; the caller then asks
-- the spill daemon to put them back from the durable tier (restore_session.lua) and runs
-- again. nil when they are there, or were never made.
-- @include fail
local function run_gone(k, marked)
  if marked and redis.call('EXISTS', k[10], k[11]) == 0 then
    return fail('RUN_GONE', ARGV[1])
  end
  return nil
end

-- The TTL rule (refresh_ttl) for a script given a session's inbox in KEYS[10] and its effect
-- ledger in KEYS[11] (the run scripts: leases, inbox, effects): they expire with the
-- session's eight keys, as the graph log does (touch_graph).
-- @include refresh_ttl
local function touch_run(ttl, now, due)
  refresh_ttl(KEYS, ttl, now, due, {10, 11}, {10, 11})
end

-- The error reply for a lease TTL that is not a whole number of milliseconds from 1 to
-- 2^40; nil when it is one.
-- @include fail
local function bad_lease_ttl(ms)
  local n = tonumber(ms)
  if not n or n < 1 or n > 1099511627776 or n ~= math.floor(n) or not string.find(ms, '^%d+$') then
    return fail('BAD_INPUT', 'lease TTL must be a whole number of milliseconds from 1')
  end
  return nil
end

-- The error reply for an id (inbox item, tool call) that is not 1-128 characters of
-- [A-Za-z0-9._@+-] (keys.rs's validate_id; the scripts put it in JSON as it is); nil when
-- it is one.
-- @include fail
local function bad_id(what, id)
  if #id < 1 or #id > 128 or not string.find(id, '^[%w%._@%+%-]+$') then
    return fail('BAD_INPUT', 'invalid ' .. what .. ' id')
  end
  return nil
end

-- An inbox item as stored in <prefix>:{p}:s:<sid>:inbox (field: its item id): a fixed header
-- the scripts read with one pattern (inbox_header), then the message body the delivery
-- appends, as the caller gave it (never decoded and encoded again: cjson would rewrite its
-- numbers). `token` and `seq` are decimal text or '' (null); `body` a JSON object.
local function inbox_item(item_id, n, state, token, seq, put_at, body)
  if token == '' then token = 'null' end
  if seq == '' then seq = 'null' end
  return '{"item_id":"' .. item_id .. '","n":' .. n .. ',"state":"' .. state .. '","token":'
    .. token .. ',"seq":' .. seq .. ',"put_at":' .. put_at .. ',"message":' .. body .. '}'
end

-- The header of an inbox item (inbox_item): n, state, token ('' for null), seq ('' for
-- null), put_at and the body, or nil for a value that is not one.
local function inbox_header(item)
  local n, state, token, seq, put_at, rest = string.match(item,
    '^{"item_id":"[^"]*","n":(%d+),"state":"(%a+)","token":(%w+),"seq":(%w+),"put_at":(%d+),"message":(.*)}$')
  if not n then
    return nil
  end
  if token == 'null' then token = '' end
  if seq == 'null' then seq = '' end
  return n, state, token, seq, put_at, rest
end

-- The error reply for a size limit that is not a whole number of bytes; nil when it is one.
-- @include fail
local function bad_limit(limit)
  if not limit or #limit > 15 or not string.find(limit, '^%d+$') then
    return fail('BAD_INPUT', 'size limit must be a whole number of bytes')
  end
  return nil
end

-- The error reply for a working-state op other than set, del or clear; nil when it is one.
-- @include fail
local function bad_working_op(op)
  if op ~= 'set' and op ~= 'del' and op ~= 'clear' then
    return fail('BAD_INPUT', 'working-state op must be set, del or clear')
  end
  return nil
end

-- The error reply for a message body over `limit` bytes or not a non-empty JSON object
-- (the caller built it; this is the script's own check); nil when it is fine. Scripts take
-- a body as its tail: the JSON object text without its opening brace (`"role":"user"}` for
-- `{"role":"user"}`), so that message_element can put its own fields in front without
-- cutting a copy of the body here (Redis' Lua hashes every byte of every string it makes).
-- @include fail
local function bad_message_body(tail, limit)
  if #tail + 1 > limit + 0 then
    return fail('TOO_LARGE', (#tail + 1) .. ' ' .. limit)
  end
  -- string.byte, not string.sub: no one-character string made per call (125 is '}')
  if #tail < 2 or string.byte(tail, -1) ~= 125 then
    return fail('BAD_INPUT', 'message body must be a non-empty JSON object')
  end
  return nil
end

-- Stores checkpoint `id` of session `sid` under `label` with `payload` (a JSON object) as
-- the latest of its label, refreshes the session, and logs it; returns the wal entry id.
-- Session keys in KEYS[1..9]; `meta` is {ttl, ttl_at} of the session's meta hash; `created`
-- (nil or a list) the key indexes the caller's own writes created, for refresh_ttl.
-- @include now_ms, refresh_ttl
local function store_checkpoint(sid, id, label, payload, meta, created)
  local now = now_ms()
  local record = '{"id":"' .. id .. '","session_id":"' .. sid .. '","label":"' .. label
    .. '","created_at":' .. now .. ',"payload":' .. payload .. '}'
  if redis.call('HSET', KEYS[4], label, record) == 1 then
    created = created or {}
    table.insert(created, 4)
  end
  redis.call('HSET', KEYS[1], 'updated_at', now)
  refresh_ttl(KEYS, meta[1], now, meta[2], created)
  return redis.call('XADD', KEYS[9], '*', 'op', 'checkpoint', 'id', sid, 'd', record)
end

-- Stored message element: `at` (the append time, ms) first, then the caller's object body,
-- given as its tail (see bad_message_body). `at` is decimal text or a number (text is
-- cheaper: a number is formatted by libc's %.14g; see clock()). A message's seq is its list
-- index + 1 and its state is in the meta's `compacted`, so neither is stored in it: each
-- took 20 to 30 bytes of every message in Redis, the wal and the durable tier.
local function message_element(at, tail)
  return '{"at":' .. at .. ',' .. tail
end

-- The append time of a stored `element`, as decimal text: `at` of message_element, or
-- `created_at` of an element an earlier build stored (`{"seq":..,"state":..,"created_at":..`,
-- still in the durable tier and restored from it).
local function element_time(element)
  return string.match(element, '^{"at":(%d+),')
    or string.match(element, '^{"seq":%d+,"state":"[a-z_]+","created_at":(%d+),')
end

-- True when `seq` lies in one of the meta `compacted` ranges ("a-b,c-d"; nil or '': none).
local function is_compacted(compacted, seq)
  for a, b in string.gmatch(compacted or '', '(%d+)-(%d+)') do
    if seq >= tonumber(a) and seq <= tonumber(b) then
      return true
    end
  end
  return false
end


-- Writes message `tail` (see bad_message_body) as seq `seq` of the session whose keys are
-- k[1..9]: its list element and its wal record, and, when `idem` is not '', the idempotency
-- key in k[5] and on the record. The one implementation of an append's writes: append_one
-- (append_message.lua, a session_batch.lua item), append_messages.lua and
-- append_checkpointed.lua call it once their checks passed; the caller advances next_seq and
-- refreshes the TTLs. `created` (nil or a list) gains the key indexes this call created, for
-- refresh_ttl. The record is the field and value it has in a batch entry (see log_messages),
-- which carries its seq (the element does not). `log` nil: the record is a batch entry of
-- its own in k[9], whose id is returned; a list: the record is added to it, for the caller
-- to write with the others of its batch, and nil is returned. Returns the wal entry id
-- with its history (tracked_id; or nil) and `created`.
-- @include message_element, tracked_id
local function write_message(k, sid, seq, tail, idem, now_text, created, log)
  local element = message_element(now_text, tail)
  if redis.call('RPUSH', k[3], element) == 1 then
    created = created or {}
    table.insert(created, 3)
  end
  if idem ~= '' then
    redis.call('HSET', k[5], idem, seq)
    created = created or {}
    table.insert(created, 5)
  end
  local field = 'msg ' .. sid .. ' ' .. seq
  if idem ~= '' then
    field = field .. ' ' .. idem
  end
  if log then
    local n = #log
    log[n + 1], log[n + 2] = field, element
    return nil, created
  end
  return tracked_id(redis.call('XADD', k[9], '*', 'op', 'batch', field, element)), created
end

-- Writes the `msg` records `log` gathered (write_message's field/value pairs, in order) as
-- ONE batch entry of the wal stream `wal` and returns its id: field `op` = `batch`, then per
-- record the field `msg <sid> <seq>` (`msg <sid> <seq> <idempotency key>` when it has one;
-- ids and keys hold no spaces) and the stored element as its value (see ARCHITECTURE.md,
-- "wal records"). Each record costs the XADD two strings that exist already but for its
-- short field: no copy of an element is made. (A one-record entry in the classic layout
-- instead cost more: the sid and key kept apart for it.) More than 1,000 records
-- (append_messages) go as several entries of 1,000, in order: unpack() of many more values
-- overflows Lua's C stack. Returns the id of the last entry with its history (tracked_id).
-- @include tracked_id
local function log_messages(wal, log)
  local id
  for i = 1, #log, 2000 do
    id = redis.call('XADD', wal, '*', 'op', 'batch', unpack(log, i, math.min(i + 1999, #log)))
  end
  return tracked_id(id)
end

-- What append_one returns when it was given only the four keys an append writes (false in
-- k[2], k[4], k[6..8]: session_batch.lua) and the session's TTL refresh is due: nothing was
-- written, and the caller sends the append as its own script (with every key).
local DEFERRED = {}

-- Appends one message to the session whose keys are k[1..9] (wal k[9]): the body of
-- append_message.lua and of a batch item (session_batch.lua). Checks before its first write,
-- so a failed item wrote nothing; the call's shape (`limit` a whole number, bad_limit) is
-- the caller's to check first (the lone script, or the batch for every item at once).
-- `now`, `now_text` are the script's clock(); `log` as for write_message (a batch gathers
-- its records and writes one wal entry per partition at its end).
-- `limit` is decimal text or a number (a batch converts each distinct limit once).
-- Returns three values, seq, wal entry id ('' for a repeat; false when `log` took the
-- record) and '1' if a repeat else '0', all as text (the batch joins them into its text
-- reply; a number would be formatted by %.14g); or one value: DEFERRED (see above) or an
-- error reply NO_SESSION / TOO_LARGE / BAD_INPUT / CONFLICT <expected> <next seq>. Several
-- values rather than a table: a batch calls this per item, and a table is an allocation
-- its garbage collector pays for again.
-- `fence` is a run lease token or '' (see fenced): a stale one is refused before any write.
-- @include fail, refresh_ttl, bad_message_body, write_message, DEFERRED, fenced
local function append_one(k, sid, tail, idem, expected, limit, fence, now, now_text, log)
  local bad = bad_message_body(tail, limit)
  if bad then
    return bad
  end
  local meta = redis.call('HMGET', k[1], 'next_seq', 'ttl_at')
  local seq = meta[1]
  if not seq then
    return fail('NO_SESSION', sid)
  end
  -- ttl_at as a number once (a text operand is converted by strtod at every use)
  local due = meta[2] and meta[2] + 0
  -- a batch gives four keys (false for the others): a due refresh needs all eight
  if not k[2] and (not due or now >= due) then
    return DEFERRED
  end
  local stale = fenced(k, fence)
  if stale then
    return stale
  end
  if idem ~= '' then
    local prev = redis.call('HGET', k[5], idem)
    if prev then
      return prev, '', '1'
    end
  end
  -- `expected` (a u64 the client formatted) and next_seq (an integer Redis formatted) are
  -- both canonical decimal text: equal as text exactly when equal as numbers
  if expected ~= '' and expected ~= seq then
    return fail('CONFLICT', expected .. ' ' .. seq)
  end
  local id, created = write_message(k, sid, seq, tail, idem, now_text, nil, log)
  redis.call('HSET', k[1], 'next_seq', seq + 1, 'updated_at', now_text)
  refresh_ttl(k, nil, now, due, created)
  return seq, id or false, '0'
end

-- The open-decision JSON kept in <prefix>:{p}:open_decisions (record_decision, restore_session).
-- @include json_str_or_null
local function decision_record(id, sid, decision, rationale, action, meta, created_at)
  return '{"id":"' .. id .. '","session_id":"' .. sid .. '","decision":' .. cjson.encode(decision)
    .. ',"rationale":' .. cjson.encode(rationale) .. ',"planned_action":' .. json_str_or_null(action)
    .. ',"meta":' .. meta .. ',"outcome":null,"created_at":' .. created_at .. '}'
end

-- Records a decision of the session whose keys are k[1..9] (decisions stream k[10], open
-- decisions hash k[11]): the body of record_decision.lua and of a batch item. `now`,
-- `now_text` are the script's clock(). Returns the decision id "<partition>:<stream entry
-- id>", or NO_SESSION.
-- @include fail, refresh_ttl, decision_record
local function decision_one(k, sid, partition, decision, rationale, action, meta_json, now,
                            now_text)
  local meta = redis.call('HMGET', k[1], 'ttl', 'ttl_at')
  if not meta[1] then
    return fail('NO_SESSION', sid)
  end
  local entry = redis.call('XADD', k[10], '*', 'type', 'decision', 'session_id', sid,
    'decision', decision, 'rationale', rationale, 'planned_action', action, 'meta', meta_json,
    'created_at', now_text)
  local id = partition .. ':' .. entry
  local record = decision_record(id, sid, decision, rationale, action, meta_json, now_text)
  redis.call('HSET', k[11], id, record)
  redis.call('HSET', k[1], 'updated_at', now_text)
  refresh_ttl(k, meta[1], now, meta[2])
  return id
end

-- Sets, deletes or clears working state of the session whose keys are k[1..8] and bumps its
-- version: the body of write_working.lua and of a batch item. Checks before its first write;
-- the call's shape (`op` one of set/del/clear, `limit` a whole number) is the caller's to
-- check first, as for append_one. `now`, `now_text` are the script's clock().
-- `fence` as for append_one.
-- Returns the new version, or BAD_INPUT / NO_SESSION / TOO_LARGE / CONFLICT <expected>
-- <current> / FENCED.
-- @include fail, refresh_ttl, fenced
local function working_one(k, sid, op, key, value, if_version, limit, fence, now, now_text)
  -- next_seq: every session has it; version is absent while 0 (META_DEFAULTS)
  local meta = redis.call('HMGET', k[1], 'next_seq', 'version', 'ttl_at')
  if not meta[1] then
    return fail('NO_SESSION', sid)
  end
  local current = meta[2] or '0'
  local stale = fenced(k, fence)
  if stale then
    return stale
  end
  if op == 'set' and #value > limit + 0 then
    return fail('TOO_LARGE', #value .. ' ' .. limit)
  end
  -- both canonical decimal text (see append_one)
  if if_version ~= '' and if_version ~= current then
    return fail('CONFLICT', if_version .. ' ' .. current)
  end
  local created = nil
  if op == 'set' then
    if redis.call('HSET', k[2], key, value) == 1 then
      created = {2}
    end
  elseif op == 'del' then
    redis.call('HDEL', k[2], key)
  else
    redis.call('DEL', k[2])
  end
  local version = redis.call('HINCRBY', k[1], 'version', 1)
  redis.call('HSET', k[1], 'updated_at', now_text)
  refresh_ttl(k, nil, now, meta[3], created)
  return version
end

-- The meta `compacted` form of `compacted` ("a-b,c-d", ascending, merged) with [from, to]
-- added: overlapping or adjacent ranges merge. The one implementation of the format:
-- compact.lua adds each new range, restore_session.lua folds the audit records.
local function merge_compacted(compacted, from, to)
  local ranges = {}
  for a, b in string.gmatch(compacted or '', '(%d+)-(%d+)') do
    table.insert(ranges, {tonumber(a), tonumber(b)})
  end
  table.insert(ranges, {from, to})
  table.sort(ranges, function(x, y) return x[1] < y[1] end)
  local merged = {}
  for _, r in ipairs(ranges) do
    local last = merged[#merged]
    if last and r[1] <= last[2] + 1 then
      if r[2] > last[2] then last[2] = r[2] end
    else
      table.insert(merged, {r[1], r[2]})
    end
  end
  local parts = {}
  for _, r in ipairs(merged) do
    table.insert(parts, r[1] .. '-' .. r[2])
  end
  return table.concat(parts, ',')
end

-- Bytes of a session index bucket above which it splits in two.
local INDEX_BUCKET_BYTES = 4000

-- A session index (`<prefix>:{p}:sessions`, `<prefix>:{p}:by_user:<uid>`) is two keys: the
-- directory, a sorted set of score 0 holding its buckets' bounds ('' first), and the
-- buckets hash `<index>:buckets`, bound → the ids from that bound up to the next one, as
-- one string ' id1 id2 ... ' in no order. A bucket splits at INDEX_BUCKET_BYTES and goes
-- when empty. Ids as fields of a few long strings take about 35 B each, against a sorted
-- set entry's 110 B (a partition's index is past `zset-max-listpack-entries` at ~1,250
-- sessions). See docs/architecture-key-protocol.md.
-- The bound of the bucket that holds (or would hold) `id`; nil when the index is empty.
local function index_bound(index, id)
  return redis.call('ZREVRANGEBYLEX', index, '[' .. id, '-', 'LIMIT', 0, 1)[1]
end

-- Whether `a` sorts before `b` bytewise, as Redis orders a sorted set's members (Lua's `<`
-- follows the server's locale).
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- Writes `ids` (ascending) into `index` and `buckets` as buckets of about half
-- INDEX_BUCKET_BYTES, after the bound `bound` ('' for the first).
-- @include INDEX_BUCKET_BYTES
local function index_write(index, buckets, ids, bound)
  local from, size = 1, 0
  for i = 1, #ids + 1 do
    if i > #ids or size > INDEX_BUCKET_BYTES / 2 then
      redis.call('ZADD', index, 0, bound)
      redis.call('HSET', buckets, bound, ' ' .. table.concat(ids, ' ', from, i - 1) .. ' ')
      if i > #ids then
        return
      end
      from, size, bound = i, 0, ids[i]
    end
    size = size + #ids[i] + 1
  end
end

-- An index an earlier build wrote (a plain set of ids, or a sorted set of them: no ''
-- bound) becomes the bucketed one the first time a script meets it; 1 when it did, else 0
-- (a bucketed index, a missing one, or any other key left alone).
-- @include bytes_less, index_write
local function index_upgrade(index, buckets)
  local kind = redis.call('TYPE', index).ok
  local ids
  if kind == 'set' then
    ids = redis.call('SMEMBERS', index)
    table.sort(ids, bytes_less)
  elseif kind == 'zset' and not redis.call('ZSCORE', index, '') then
    ids = redis.call('ZRANGE', index, 0, -1)
  else
    return 0
  end
  redis.call('DEL', index, buckets)
  index_write(index, buckets, ids, '')
  return 1
end

-- Adds `id` to `index` (buckets hash `buckets`); 1 when it was not there, else 0.
-- @include INDEX_BUCKET_BYTES, index_bound, bytes_less, index_write
local function index_add(index, buckets, id)
  local bound = index_bound(index, id)
  if not bound then
    bound = ''
    redis.call('ZADD', index, 0, '')
  end
  local ids = redis.call('HGET', buckets, bound) or ' '
  if string.find(ids, ' ' .. id .. ' ', 1, true) then
    return 0
  end
  ids = ids .. id .. ' '
  if #ids <= INDEX_BUCKET_BYTES then
    redis.call('HSET', buckets, bound, ids)
    return 1
  end
  local all = {}
  for member in string.gmatch(ids, '%S+') do
    all[#all + 1] = member
  end
  table.sort(all, bytes_less)
  index_write(index, buckets, all, bound)
  return 1
end

-- Removes `id` from `index` (nothing when it is not there).
-- @include index_bound
local function index_remove(index, buckets, id)
  local bound = index_bound(index, id)
  local ids = bound and redis.call('HGET', buckets, bound)
  local at = ids and string.find(ids, ' ' .. id .. ' ', 1, true)
  if not at then
    return
  end
  ids = string.sub(ids, 1, at) .. string.sub(ids, at + #id + 2)
  if ids ~= ' ' then
    redis.call('HSET', buckets, bound, ids)
    return
  end
  redis.call('HDEL', buckets, bound)
  -- the '' bound stays while other buckets do
  if bound ~= '' then
    redis.call('ZREM', index, bound)
  end
  if redis.call('EXISTS', buckets) == 0 then
    redis.call('DEL', index)
  end
end

-- Whether `index` holds `id`.
-- @include index_bound
local function index_has(index, buckets, id)
  local bound = index_bound(index, id)
  local ids = bound and redis.call('HGET', buckets, bound)
  return ids and string.find(ids, ' ' .. id .. ' ', 1, true) ~= nil or false
end
