--[[
  session_batch: group commit (src/group_commit.rs): several writes to sessions in one
  EVALSHA, each run as its own script would run it, in order.
  KEYS               per item, in item order, the KEYS of its own script: the session's
                     keys 1..9 (see _prelude: 9 is its partition's wal), and for a
                     decision two more: its partition's decisions stream and open
                     decisions hash (record_decision.lua's KEYS[10], KEYS[11])
  (On a cluster every item is of one partition, one slot; a single node takes a batch
  spanning partitions.)
  ARGV               per item: its op, then the ARGV of its own script:
                       'append'   5 (append_message.lua's ARGV[1..5])
                       'decision' 6 (record_decision.lua's ARGV[1..6])
                       'working'  6 (write_working.lua's ARGV[1..6])
  Returns: one text, a line per item in order (joined by newlines): '1 ' then what its own
  script returns (the three values of an append joined by spaces, the one value of a
  decision or a working-state write), or '0 ' then 'CODE detail' for the error its own
  script would raise (NO_SESSION, TOO_LARGE, BAD_INPUT, CONFLICT): an item's failure writes
  nothing for it and does not stop the others. No value or error text has a newline, and
  only an error's has spaces (ids, numbers and wal entry ids have none). Text, because
  Redis converts every table of a reply with several field probes each and every value of
  one apart (and the client parses each value apart): one string costs a fraction of both.
  Errors:  BAD_INPUT for a malformed call (an op it does not know, an item short of its
  arguments, KEYS that do not match the items, a size limit that is not a whole number, a
  working-state op other than set/del/clear): the whole batch is refused, nothing written.
  Wal: the appends' records go to ONE batch entry per wal stream (per partition), written
  after every item ran, records in item order (log_messages in _prelude); every appended
  item's reply names its entry's id. A failed or repeated item has no record in it.
  Invariant: items of one session run in item order (gapless seqs, versions); one TIME
  for the whole batch.
  Atomic: every item's arguments are checked before the first write of any item (issue 29:
  a bad limit in item 2 used to fail after item 1 was written).
]]
-- KEYS and ARGV are globals (a hash lookup on every use): locals here, read ~15 times an item
local KEYS, ARGV = KEYS, ARGV
-- Arguments after the op, and KEYS, of an item of each op.
local WIDTH = {append = 5, decision = 6, working = 6}
local NKEYS = {append = 9, decision = 11, working = 9}
do
  local a, base = 1, 0
  while a <= #ARGV do
    local op = ARGV[a]
    local width = WIDTH[op]
    if not width or a + width > #ARGV then
      return fail('BAD_INPUT', 'batch item at ARGV[' .. a .. '] is not a whole item')
    end
    local bad
    if op == 'append' then
      bad = bad_limit(ARGV[a + 5])
    elseif op == 'working' then
      bad = bad_working_op(ARGV[a + 2]) or bad_limit(ARGV[a + 6])
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
-- The wal records of the batch's appends, per wal stream (a single node's batch spans
-- partitions), in first-use order: each becomes ONE wal entry at the end (log_messages).
local logs, wals = {}, {}
local lines, pending_seq, pending_wal = {}, {}, {}
local a, base = 1, 0
while a <= #ARGV do
  local op, r = ARGV[a], nil
  -- A constructor sizes the table once (filling an empty one rehashes it at 1, 2, 4, 8).
  local k = {KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4], KEYS[base + 5],
    KEYS[base + 6], KEYS[base + 7], KEYS[base + 8], KEYS[base + 9]}
  if op == 'decision' then
    k[10], k[11] = KEYS[base + 10], KEYS[base + 11]
    base = base + 11
  else
    base = base + 9
  end
  if op == 'append' then
    local log = logs[k[9]]
    if not log then
      log = {}
      logs[k[9]] = log
      wals[#wals + 1] = k[9]
    end
    r = append_one(k, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], now,
      now_text, log)
    a = a + 6
    if not r.err and r[3] == '0' then
      -- written: its line waits for its wal entry's id
      local i = #lines + 1
      lines[i], pending_seq[i], pending_wal[i] = false, r[1], k[9]
      r = nil
    end
  elseif op == 'decision' then
    r = decision_one(k, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5],
      ARGV[a + 6], now, now_text)
    a = a + 7
  else
    r = working_one(k, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5],
      ARGV[a + 6], now, now_text)
    a = a + 7
  end
  if r == nil then
    -- an append whose line is written below
  elseif type(r) ~= 'table' then
    lines[#lines + 1] = '1 ' .. r
  elseif r.err then
    lines[#lines + 1] = '0 ' .. r.err
  else
    lines[#lines + 1] = '1 ' .. table.concat(r, ' ')
  end
end
local ids = {}
for _, wal in ipairs(wals) do
  if #logs[wal] > 0 then
    ids[wal] = log_messages(wal, logs[wal])
  end
end
for i, seq in pairs(pending_seq) do
  lines[i] = '1 ' .. seq .. ' ' .. ids[pending_wal[i]] .. ' 0'
end
return table.concat(lines, '\n')
