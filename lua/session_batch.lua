--[[
  session_batch: group commit (src/group_commit.rs): several writes to sessions of one
  partition (one slot) in one EVALSHA, each run as its own script would run it, in order.
  KEYS[1]            the partition's wal stream
  KEYS[2]            the partition's decisions stream
  KEYS[3]            the partition's open decisions hash
  KEYS[4+8(i-1)..]   item i's session keys 1..8 (see _prelude), 8 per item
  ARGV               per item: its op, then the ARGV of its own script:
                       'append'   5 (append_message.lua's ARGV[1..5])
                       'decision' 6 (record_decision.lua's ARGV[1..6])
                       'working'  6 (write_working.lua's ARGV[1..6])
  Returns: one reply per item, in order: {1, what its own script returns}, or
  {0, 'CODE detail'} for the error its own script would raise (NO_SESSION, TOO_LARGE,
  BAD_INPUT, CONFLICT): an item's failure writes nothing for it and does not stop the
  others.
  Invariant: items of one session run in item order (gapless seqs, versions).
]]
local now = now_ms()
local out = {}
local a, i = 1, 0
while a <= #ARGV do
  i = i + 1
  local base = 3 + 8 * (i - 1)
  local k = {}
  for j = 1, 8 do
    k[j] = KEYS[base + j]
  end
  k[9], k[10], k[11] = KEYS[1], KEYS[2], KEYS[3]
  local op, r = ARGV[a], nil
  if op == 'append' then
    r = append_one(k, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], now)
    a = a + 6
  elseif op == 'decision' then
    r = decision_one(k, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5],
      ARGV[a + 6], now)
    a = a + 7
  else
    r = working_one(k, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5],
      ARGV[a + 6], now)
    a = a + 7
  end
  if type(r) == 'table' and r.err then
    out[i] = {0, r.err}
  else
    out[i] = {1, r}
  end
end
return out
