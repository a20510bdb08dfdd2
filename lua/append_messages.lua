--[[
  append_messages: append several messages in one atomic step (consecutive seqs, nothing of
  another writer in between); their records go to ONE batch entry of the wal (log_messages
  in _prelude; more than 1,000 messages make one entry per 1,000).
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] expected seq of the first message or '' (the seq the caller believes comes next)
  ARGV[3] size limit of one message body, bytes
  ARGV[4] run lease token or '' (fenced in _prelude: a stale one writes nothing)
  ARGV[5] idempotency key of the whole batch or '': a repeated key returns the original
          first seq and writes nothing. It is stored on the first message only (its seq is
          what a repeat returns), so it is spilled, restored and dropped by a pop of that
          message as an append's key is.
  ARGV[6..] message bodies: JSON objects without `at` (validated by the
            caller), each without its opening brace (see bad_message_body in _prelude)
  Returns: {first seq, the (last) wal entry id ('' for a repeat)}
  Errors:  NO_SESSION, TOO_LARGE, BAD_INPUT, CONFLICT <expected> <next seq>, FENCED
  Invariant: seqs are 1, 2, 3, ... without gaps; message seq s is list index s-1.
  Atomic: every check (of every body) runs before the first write. Each message is written
  by write_message in _prelude, as append_message and a batch item write theirs.
]]
-- @include unchecked, clock, fail, refresh_ttl, bad_argc, bad_message_body, write_message, log_messages
-- @include session_meta, fenced
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(6, 1)
if bad_args then
  return bad_args
end
if #ARGV < 6 then
  return fail('BAD_INPUT', 'no messages to append')
end
for i = 6, #ARGV do
  local bad = bad_message_body(ARGV[i], ARGV[3])
  if bad then
    return bad
  end
end
local meta, missing = session_meta('next_seq', 'ttl', 'ttl_at')
if missing then
  return missing
end
local stale = fenced(KEYS, ARGV[4])
if stale then
  return stale
end
local idem = ARGV[5]
if idem ~= '' then
  -- a repeat wins over expect_seq, as in append_one: the caller's retry learns its seqs
  local prev = redis.call('HGET', KEYS[5], idem)
  if prev then
    return {tonumber(prev), ''}
  end
end
local first = tonumber(meta[1])
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= first then
  return fail('CONFLICT', ARGV[2] .. ' ' .. first)
end
local now, now_text = clock()
local seq, created, log = first, nil, {}
for i = 6, #ARGV do
  local key = i == 6 and idem or ''
  created = select(2, write_message(KEYS, ARGV[1], seq, ARGV[i], key, now_text, created, log))
  seq = seq + 1
end
local id = log_messages(KEYS[9], log)
redis.call('HSET', KEYS[1], 'next_seq', seq, 'updated_at', now_text)
refresh_ttl(KEYS, meta[2], now, meta[3], created)
return {first, id}
