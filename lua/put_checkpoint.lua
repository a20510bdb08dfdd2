--[[
  put_checkpoint: store a checkpoint whose payload the caller gives (not taken from working
  state); keep it as the label's latest; log it to the wal like create_checkpoint.
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id      ARGV[2] checkpoint id      ARGV[3] label
  ARGV[4] payload: a JSON object (validated by the caller)
  ARGV[5] size limit of the payload, bytes
  ARGV[6] run lease token or '' (fenced in _prelude: a stale one writes nothing)
  Returns: the wal entry id
  Errors:  NO_SESSION, TOO_LARGE, BAD_INPUT, FENCED
  Atomic: every check runs before the first write.
]]
-- @include unchecked, fail, bad_argc, store_checkpoint, session_meta, fenced
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(6)
if bad_args then
  return bad_args
end
local payload = ARGV[4]
if #payload > tonumber(ARGV[5]) then
  return fail('TOO_LARGE', #payload .. ' ' .. ARGV[5])
end
if string.sub(payload, 1, 1) ~= '{' or string.sub(payload, -1) ~= '}' then
  return fail('BAD_INPUT', 'checkpoint payload must be a JSON object')
end
local meta, missing = session_meta('ttl', 'ttl_at')
if missing then
  return missing
end
local stale = fenced(KEYS, ARGV[6])
if stale then
  return stale
end
return store_checkpoint(ARGV[1], ARGV[2], ARGV[3], payload, meta)
