--[[
  replace_message: replace the body of one active message (e.g. a redaction); the seq, state
  and append time stay; log the new element to the wal (a batch entry: its field names the
  seq, which the element does not hold).
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] seq of the message to replace
  ARGV[3] new message body: a JSON object without `at` (validated by the
          caller), without its opening brace (see bad_message_body in _prelude)
  ARGV[4] size limit, bytes
  ARGV[5] run lease token or '' (fenced in _prelude: a stale one writes nothing)
  Returns: the wal entry id
  Errors:  NO_SESSION, TOO_LARGE, BAD_INPUT, BAD_RANGE <seq> <seq> <why> (no such seq, or the
           message is compacted out), FENCED
  Atomic: every check runs before the first write.
]]
-- @include unchecked, now_ms, fail, refresh_ttl, bad_argc, bad_message_body, message_element, session_meta
-- @include fenced, element_time, is_compacted
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(5) or bad_message_body(ARGV[3], ARGV[4])
if bad_args then
  return bad_args
end
local meta, missing = session_meta('next_seq', 'ttl', 'ttl_at', 'compacted')
if missing then
  return missing
end
local stale = fenced(KEYS, ARGV[5])
if stale then
  return stale
end
local body = ARGV[3]
local seq = tonumber(ARGV[2])
if not seq or seq < 1 or seq >= tonumber(meta[1]) then
  return fail('BAD_RANGE', ARGV[2] .. ' ' .. ARGV[2] .. ' no such message (next seq ' .. meta[1] .. ')')
end
if is_compacted(meta[4], seq) then
  return fail('BAD_RANGE', seq .. ' ' .. seq .. ' is compacted out')
end
local at = element_time(redis.call('LINDEX', KEYS[3], seq - 1))
local now = now_ms()
local element = message_element(at, body)
redis.call('LSET', KEYS[3], seq - 1, element)
redis.call('HSET', KEYS[1], 'updated_at', now)
refresh_ttl(KEYS, meta[2], now, meta[3])
return redis.call('XADD', KEYS[9], '*', 'op', 'batch', 'msg_replace ' .. ARGV[1] .. ' ' .. seq,
  element)
