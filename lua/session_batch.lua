--[[
  session_batch: group commit (src/group_commit.rs): several writes to sessions in one
  EVALSHA, each run as its own script would run it, in order.
  KEYS               per item, in item order:
                       'append'   5: the session's meta, message list, idempotency hash and
                                  its partition's wal (append_message.lua's KEYS[1], [3],
                                  [5], [9]); the four keys an append writes while its
                                  session's TTL refresh is not due (see `Deferred` below)
                       'working'  10: the session's keys 1..9 (see _prelude)
                       'decision' 12: keys 1..9, then its partition's decisions stream and
                                  open decisions hash (record_decision.lua's KEYS[10], [11])
                     each followed by its partition's commit marker (the lone script's
                     KEYS[#KEYS]: an item of a partition no daemon checked in this Redis
                     history fails NOT_DECIDED, unchecked in _prelude)
  (On a cluster every item is of one partition, one slot; a single node takes a batch
  spanning partitions.)
  ARGV               per item: its op, then the ARGV of its own script:
                       'append'   6 (append_message.lua's ARGV[1..6])
                       'decision' 6 (record_decision.lua's ARGV[1..6])
                       'working'  7 (write_working.lua's ARGV[1..7])
  Returns: one text, a line per item in order (joined by newlines): '1 ' then what its own
  script returns (the three values of an append joined by spaces, the one value of a
  decision or a working-state write), '0 ' then 'CODE detail' for the error its own script
  would raise (NO_SESSION, TOO_LARGE, BAD_INPUT, CONFLICT, FENCED), or '2' for an item not run
  (Deferred). An item's failure writes nothing for it and does not stop the others. No
  value or error text has a newline, and only an error's has spaces (ids, numbers and wal
  entry ids have none). Text, because Redis converts every table of a reply with several
  field probes each and every value of one apart (and the client parses each value apart):
  one string costs a fraction of both.
  Deferred: an append whose session's TTL refresh is due (meta `ttl_at` passed, see
  refresh_ttl) would touch all eight session keys, and a script may touch only the keys it
  is given: it is not run, and neither is any later item of that session in the batch (their
  order holds). The caller sends each as its own script, in order, before the session's next
  writes (once per session per tenth of its TTL).
  Errors:  BAD_INPUT for a malformed call (an op it does not know, an item short of its
  arguments, KEYS that do not match the items, a size limit that is not a whole number, a
  working-state op other than set/del/clear): the whole batch is refused, nothing written.
  Wal: the records of each run of consecutive appends to one wal stream go to ONE batch entry
  (log_messages in _prelude), written once the run's items ran, records in item order; every
  appended item's reply names its entry's id. A failed, repeated or deferred item has no
  record in it. The client sends a batch's items grouped by partition (a stable sort: items
  of one session keep their order), so a batch writes one entry per partition.
  Invariant: items of one session run in item order (gapless seqs, versions); one TIME
  for the whole batch.
  Atomic: every item's arguments are checked before the first write of any item, so
  a bad limit in item 2 fails before item 1 is written.
]]
-- @include unchecked, clock, fail, bad_limit, bad_working_op, log_messages, DEFERRED, append_one
-- @include decision_one, working_one
-- KEYS and ARGV are globals (a hash lookup on every use): locals here, read ~15 times an item
local KEYS, ARGV = KEYS, ARGV
-- Arguments after the op, and KEYS, of an item of each op.
local WIDTH = {append = 6, decision = 6, working = 7}
local NKEYS = {append = 5, decision = 12, working = 10}
-- Each distinct size limit of the batch (its text) as a number: checked and converted once,
-- not once per item (a text operand costs a strtod at every use; a batch has one or two).
local limits = {}
do
  local a, base = 1, 0
  while a <= #ARGV do
    local op = ARGV[a]
    local width = WIDTH[op]
    if not width or a + width > #ARGV then
      return fail('BAD_INPUT', 'batch item at ARGV[' .. a .. '] is not a whole item')
    end
    local bad, limit
    if op == 'append' then
      limit = ARGV[a + 5]
    elseif op == 'working' then
      bad, limit = bad_working_op(ARGV[a + 2]), ARGV[a + 6]
    end
    if not bad and limit and not limits[limit] then
      bad = bad_limit(limit)
      if not bad then
        limits[limit] = limit + 0
      end
    end
    if bad then
      return bad
    end
    a, base = a + width + 1, base + NKEYS[op]
  end
  if base ~= #KEYS then
    return fail('BAD_INPUT', 'batch KEYS do not match its items')
  end
end
local now, now_text = clock()
-- The reply, as pieces joined once at the end (a line joined per item would be one more
-- string for Lua to hash, and its collector to free): each line's first piece starts with
-- its newline, which the first line's loses at the end.
local out, n = {}, 0
-- The wal records of the current run of appends to one wal stream, in item order: written as
-- ONE entry when the run ends (log_messages), and the places in `out` of its items' entry
-- id. The client sends a batch's items grouped by partition, so a run is a partition's
-- appends. `log` and `slots` are reused from run to run.
local run_wal, log, slots = nil, {}, {}
local function end_run()
  if #log == 0 then
    return
  end
  local id = log_messages(run_wal, log)
  for i = 1, #slots do
    out[slots[i]], slots[i] = id, nil
  end
  for i = 1, #log do
    log[i] = nil
  end
end
-- An append is given four keys: the others are never read unless the refresh is due, and
-- then it is deferred (false in their place). One table for every append item, refilled.
local ak = {false, false, false, false, false, false, false, false, false}
-- Meta keys of the sessions whose items are deferred from here on (made at the first).
local deferred
-- Per commit marker (an item's last key): whether its partition's writes must wait
-- (unchecked in _prelude), asked once a batch.
local closed = {}
local a, base = 1, 0
while a <= #ARGV do
  local op = ARGV[a]
  local next_a, next_base = a + WIDTH[op] + 1, base + NKEYS[op]
  -- an append's three values (append_one), or the one value of any other outcome
  local r, id, repeated
  local gate = KEYS[next_base]
  if closed[gate] == nil then
    closed[gate] = unchecked(gate, '') ~= nil
  end
  if deferred and deferred[KEYS[base + 1]] then
    r = DEFERRED
  elseif closed[gate] then
    r = fail('NOT_DECIDED', ARGV[a + 1])
  elseif op == 'append' then
    ak[1], ak[3], ak[5], ak[9] = KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4]
    if ak[9] ~= run_wal then
      end_run()
      run_wal = ak[9]
    end
    r, id, repeated = append_one(ak, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4],
      limits[ARGV[a + 5]], ARGV[a + 6], now, now_text, log)
  else
    -- A constructor sizes the table once (filling an empty one rehashes it at 1, 2, 4, 8).
    local k = {KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4], KEYS[base + 5],
      KEYS[base + 6], KEYS[base + 7], KEYS[base + 8], KEYS[base + 9]}
    if op == 'decision' then
      k[10], k[11] = KEYS[base + 10], KEYS[base + 11]
      r = decision_one(k, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5],
        ARGV[a + 6], now, now_text)
    else
      r = working_one(k, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5],
        limits[ARGV[a + 6]], ARGV[a + 7], now, now_text)
    end
  end
  if repeated == '0' then
    -- written: its entry id is filled in when its run ends
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = '\n1 ', r, ' ', false, ' 0'
    slots[#slots + 1] = n + 4
    n = n + 5
  elseif repeated then
    out[n + 1], out[n + 2], out[n + 3] = '\n1 ', r, '  1'
    n = n + 3
  elseif r == DEFERRED then
    deferred = deferred or {}
    deferred[KEYS[base + 1]] = true
    out[n + 1] = '\n2'
    n = n + 1
  elseif type(r) == 'table' then
    out[n + 1], out[n + 2] = '\n0 ', r.err
    n = n + 2
  else
    out[n + 1], out[n + 2] = '\n1 ', r
    n = n + 2
  end
  a, base = next_a, next_base
end
end_run()
if n == 0 then
  return ''
end
out[1] = string.sub(out[1], 2)
return table.concat(out, '', 1, n)
