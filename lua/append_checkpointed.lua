--[[
  append_checkpointed: append one message and store a checkpoint in the same atomic step: a
  framework's event together with the state it leaves (Google ADK's append_event), so no
  reader sees the one without the other; log both to the wal.
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] message body tail (see bad_message_body in _prelude; validated by the caller)
  ARGV[3] expected seq or '' (the seq the caller believes comes next: its view of the session)
  ARGV[4] message size limit, bytes
  ARGV[5] checkpoint id      ARGV[6] label
  ARGV[7] checkpoint payload: a JSON object (validated by the caller)
  ARGV[8] checkpoint size limit, bytes
  ARGV[9] run lease token or '' (fenced in _prelude: a stale one writes nothing)
  Returns: {seq, wal entry id of the checkpoint} (the message's entry comes just before it)
  Errors:  NO_SESSION, TOO_LARGE, BAD_INPUT, CONFLICT <expected> <next seq>, FENCED
  Invariant: seqs are 1, 2, 3, ... without gaps; message seq s is list index s-1.
  Atomic: every check runs before the first write.
]]
-- @include unchecked, clock, fail, bad_argc, bad_limit, bad_message_body, store_checkpoint, write_message
-- @include session_meta, fenced
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(9) or bad_limit(ARGV[4]) or bad_limit(ARGV[8])
  or bad_message_body(ARGV[2], ARGV[4])
if bad_args then
  return bad_args
end
local payload = ARGV[7]
if #payload > tonumber(ARGV[8]) then
  return fail('TOO_LARGE', #payload .. ' ' .. ARGV[8])
end
if string.sub(payload, 1, 1) ~= '{' or string.sub(payload, -1) ~= '}' then
  return fail('BAD_INPUT', 'checkpoint payload must be a JSON object')
end
local meta, missing = session_meta('next_seq', 'ttl', 'ttl_at')
if missing then
  return missing
end
local stale = fenced(KEYS, ARGV[9])
if stale then
  return stale
end
if ARGV[3] ~= '' and ARGV[3] ~= meta[1] then
  return fail('CONFLICT', ARGV[3] .. ' ' .. meta[1])
end
local _, now_text = clock()
local _, created = write_message(KEYS, ARGV[1], meta[1], ARGV[2], '', now_text, nil)
redis.call('HSET', KEYS[1], 'next_seq', meta[1] + 1)
return {meta[1], store_checkpoint(ARGV[1], ARGV[5], ARGV[6], payload, {meta[2], meta[3]}, created)}
