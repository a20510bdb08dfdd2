--[[
  append_message: allocate the next seq and append one message; log it to the wal.
  KEYS[1..9] session keys (see _prelude)
  ARGV[1] session id
  ARGV[2] message body: a JSON object without seq/state/created_at (validated by the caller)
  ARGV[3] idempotency key or '' (a repeated key returns the original seq and writes nothing)
  ARGV[4] expected seq or '' (the seq the caller believes comes next)
  ARGV[5] size limit, bytes
  Returns: {seq, wal entry id ('' for a repeat), 1 if this was a repeat else 0}
  Errors:  NO_SESSION, TOO_LARGE, BAD_INPUT, CONFLICT <expected> <next seq>
  Invariant: seqs are 1, 2, 3, ... without gaps; message seq s is list index s-1.
  Atomic: every check runs before the first write.
]]
local body = ARGV[2]
local bad = bad_message_body(body, ARGV[5])
if bad then
  return bad
end
local meta = redis.call('HMGET', KEYS[1], 'next_seq', 'ttl')
if not meta[1] then
  return fail('NO_SESSION', ARGV[1])
end
local idem = ARGV[3]
if idem ~= '' then
  local prev = redis.call('HGET', KEYS[5], idem)
  if prev then
    return {tonumber(prev), '', 1}
  end
end
local seq = tonumber(meta[1])
if ARGV[4] ~= '' and tonumber(ARGV[4]) ~= seq then
  return fail('CONFLICT', ARGV[4] .. ' ' .. seq)
end
local now = now_ms()
local element = message_element(seq, 'active', now, body)
redis.call('RPUSH', KEYS[3], element)
redis.call('HSET', KEYS[1], 'next_seq', seq + 1, 'updated_at', now)
local id
if idem ~= '' then
  redis.call('HSET', KEYS[5], idem, seq)
  id = redis.call('XADD', KEYS[9], '*', 'op', 'msg', 'id', ARGV[1], 'd', element, 'k', idem)
else
  id = redis.call('XADD', KEYS[9], '*', 'op', 'msg', 'id', ARGV[1], 'd', element)
end
touch_session(tonumber(meta[2]))
return {seq, id, 0}
