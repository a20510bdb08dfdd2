--[[
  write_working: set, delete or clear working state and bump the session's version.
  Working state is ephemeral: nothing goes to the wal.
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] op: 'set', 'del' or 'clear'
  ARGV[3] working-state key ('' for clear)
  ARGV[4] JSON value (for set; validated by the caller)
  ARGV[5] expected version or '' (set_if_version)
  ARGV[6] size limit of the value, bytes
  ARGV[7] run lease token or '' (fenced in _prelude: a stale one writes nothing)
  Returns: the new version (integer)
  Errors:  BAD_INPUT (an op other than set/del/clear, a limit not a whole number),
           NO_SESSION, TOO_LARGE, CONFLICT <expected> <current>, FENCED
  Atomic: every check runs before the first write (the body is working_one in _prelude,
  shared with session_batch.lua).
]]
-- @include unchecked, clock, bad_argc, bad_limit, bad_working_op, working_one
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(7) or bad_working_op(ARGV[2]) or bad_limit(ARGV[6])
if bad_args then
  return bad_args
end
return working_one(KEYS, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7],
  clock())
