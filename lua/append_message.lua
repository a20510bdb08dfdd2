--[[
  append_message: allocate the next seq and append one message; log it to the wal.
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] message body: a JSON object without `at` (validated by the caller),
          without its opening brace (see bad_message_body in _prelude)
  ARGV[3] idempotency key or '' (a repeated key returns the original seq and writes nothing)
  ARGV[4] expected seq or '' (the seq the caller believes comes next)
  ARGV[5] size limit, bytes
  ARGV[6] run lease token or '' (fenced in _prelude: a stale one writes nothing)
  Returns: {seq, wal entry id ('' for a repeat), '1' if this was a repeat else '0'}, as text
  Errors:  NO_SESSION, TOO_LARGE, BAD_INPUT, CONFLICT <expected> <next seq>, FENCED
  Invariant: seqs are 1, 2, 3, ... without gaps; message seq s is list index s-1.
  Atomic: every check runs before the first write (the body is append_one in _prelude,
  shared with session_batch.lua; its writes are write_message, shared with append_messages).
]]
-- @include unchecked, clock, bad_argc, bad_limit, append_one
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(6) or bad_limit(ARGV[5])
if bad_args then
  return bad_args
end
local seq, id, repeated = append_one(KEYS, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6],
  clock())
if not repeated then
  return seq -- an error reply
end
return {seq, id, repeated}
