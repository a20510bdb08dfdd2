--[[
  pop_message: remove the newest message of a session (the next append gets its seq again);
  log the removal to the wal.
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] run lease token or '' (fenced in _prelude: a stale one writes nothing)
  Returns: {removed element, wal entry id, its seq}, or {} when the session has no message
           (nothing written). The removed message is active: it is after the latest
           compaction's note, which cannot be popped.
  Errors:  NO_SESSION, BAD_RANGE <seq> <seq> <why> (the newest message is the note of the
           latest compaction: pop would leave the audit pointing at nothing), FENCED
  Invariant: seqs stay 1..next_seq-1 without gaps (seq s is list index s-1); idempotency
  keys that pointed at the removed seq are dropped, so a retry appends again.
  Cost: O(1), plus O(idempotency keys of the session) when it has any.
  Atomic: every check runs before the first write.
]]
-- @include unchecked, now_ms, fail, refresh_ttl, open_session, fenced
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(2, nil, 'next_seq', 'ttl', 'ttl_at')
if bad then
  return bad
end
bad = fenced(KEYS, ARGV[2])
if bad then
  return bad
end
local seq = tonumber(meta[1]) - 1
if seq < 1 then
  return {}
end
local latest = redis.call('LINDEX', KEYS[6], -1)
if latest and tonumber(string.match(latest, '"note_seq":(%d+)')) == seq then
  return fail('BAD_RANGE', seq .. ' ' .. seq .. ' is the note of the latest compaction')
end
local now = now_ms()
local element = redis.call('RPOP', KEYS[3])
redis.call('HSET', KEYS[1], 'next_seq', seq, 'updated_at', now)
if redis.call('HLEN', KEYS[5]) > 0 then
  local idem = redis.call('HGETALL', KEYS[5])
  for i = 1, #idem, 2 do
    if tonumber(idem[i + 1]) == seq then
      redis.call('HDEL', KEYS[5], idem[i])
    end
  end
end
refresh_ttl(KEYS, meta[2], now, meta[3])
local id = redis.call('XADD', KEYS[9], '*', 'op', 'msg_pop', 'id', ARGV[1],
  'd', '{"seq":' .. seq .. ',"updated_at":' .. now .. '}')
return {element, id, seq}
