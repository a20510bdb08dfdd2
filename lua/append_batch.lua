--[[
  append_batch: the group commit of appends (src/group_commit.rs): several appends to
  sessions of one partition (one slot) in one EVALSHA, each as append_message.lua would
  run it, in order.
  KEYS[1]            the partition's wal stream
  KEYS[2+8(i-1)..]   item i's session keys 1..8 (see _prelude), 8 per item
  ARGV[5(i-1)+1..5]  item i: session id, message body, idempotency key or '', expected seq
                     or '', size limit (as append_message.lua's ARGV[1..5])
  Returns: one reply per item, in order: {seq, wal entry id ('' for a repeat), repeat 0/1},
  or the text `CODE detail` of the error append_message.lua would raise (NO_SESSION,
  TOO_LARGE, BAD_INPUT, CONFLICT): an item's failure writes nothing for it and does not
  stop the others.
  Invariant: items of one session get gapless seqs in item order.
]]
local now = now_ms()
local out = {}
local n = #ARGV / 5
for i = 1, n do
  local base = 1 + 8 * (i - 1)
  local k = {}
  for j = 1, 8 do
    k[j] = KEYS[base + j]
  end
  k[9] = KEYS[1]
  local a = 5 * (i - 1)
  local r = append_one(k, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], now)
  if r.err then
    out[i] = r.err
  else
    out[i] = r
  end
end
return out
