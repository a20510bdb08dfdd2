--[[
  record_decision: append a decision to the partition's decisions stream (the write-ahead
  decision log) and keep it in the open set until an outcome is recorded.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   decisions stream        <prefix>:{p}:decisions
  KEYS[11]   open decisions hash     <prefix>:{p}:open_decisions
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id     ARGV[2] partition number
  ARGV[3] decision       ARGV[4] rationale      ARGV[5] planned action or ''
  ARGV[6] meta JSON object (validated by the caller)
  Returns: the decision id "<partition>:<stream entry id>"
  Errors:  NO_SESSION
  Atomic: the existence check runs before the first write (the body is decision_one in
  _prelude, shared with session_batch.lua).
]]
-- @include unchecked, clock, bad_argc, decision_one
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(6)
if bad_args then
  return bad_args
end
return decision_one(KEYS, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], clock())
