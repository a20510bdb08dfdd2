--[[
  record_outcome: append the outcome of a decision to the decisions stream and take the
  decision out of the open set. Recording an outcome twice is a no-op.
  KEYS[1] decisions stream       <prefix>:{p}:decisions
  KEYS[2] open decisions hash    <prefix>:{p}:open_decisions
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] decision id "<p>:<entry id>"
  ARGV[2] the stream entry id part of it
  ARGV[3] outcome text
  Returns: {1, outcome entry id} when recorded, {0, ''} when the decision was no longer open
  (it already had an outcome, or its session was closed)
  Errors:  NO_DECISION when the decision is neither open nor in the stream
  Atomic: every check runs before the first write.
]]
-- @include unchecked, now_ms, fail, bad_argc
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(3)
if bad_args then
  return bad_args
end
local open = redis.call('HGET', KEYS[2], ARGV[1])
if not open then
  if #redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2]) == 0 then
    return fail('NO_DECISION', ARGV[1])
  end
  return {0, ''}
end
local sid = string.match(open, '"session_id":"([^"]+)"')
local entry = redis.call('XADD', KEYS[1], '*', 'type', 'outcome', 'decision_id', ARGV[1],
  'session_id', sid, 'outcome', ARGV[3], 'created_at', now_ms())
redis.call('HDEL', KEYS[2], ARGV[1])
return {1, entry}
