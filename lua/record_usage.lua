--[[
  record_usage: upsert the token usage of one round; log it to the wal.
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] round index
  ARGV[3] usage JSON object (round_index, prompt_tokens, ...; built by the caller)
  Returns: the wal entry id
  Errors:  NO_SESSION
  Atomic: the existence check runs before the first write.
]]
-- @include unchecked, now_ms, refresh_ttl, open_session
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(3, nil, 'ttl', 'ttl_at')
if bad then
  return bad
end
local now = now_ms()
local record = '{"created_at":' .. now .. ',' .. string.sub(ARGV[3], 2)
local new = redis.call('HSET', KEYS[7], ARGV[2], record)
redis.call('HSET', KEYS[1], 'updated_at', now)
refresh_ttl(KEYS, meta[1], now, meta[2], new == 1 and {7} or nil)
return redis.call('XADD', KEYS[9], '*', 'op', 'usage', 'id', ARGV[1], 'd', record)
