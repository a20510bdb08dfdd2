--[[
  record_decision: append a decision to the partition's decisions stream (the write-ahead
  decision log) and keep it in the open set until an outcome is recorded.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   decisions stream        <prefix>:{p}:decisions
  KEYS[11]   open decisions hash     <prefix>:{p}:open_decisions
  ARGV[1] session id     ARGV[2] partition number
  ARGV[3] decision       ARGV[4] rationale      ARGV[5] planned action or ''
  ARGV[6] meta JSON object (validated by the caller)
  Returns: the decision id "<partition>:<stream entry id>"
  Errors:  NO_SESSION
  Atomic: the existence check runs before the first write.
]]
local meta = redis.call('HMGET', KEYS[1], 'ttl', 'ttl_at')
if not meta[1] then
  return fail('NO_SESSION', ARGV[1])
end
local now = now_ms()
local entry = redis.call('XADD', KEYS[10], '*', 'type', 'decision', 'session_id', ARGV[1],
  'decision', ARGV[3], 'rationale', ARGV[4], 'planned_action', ARGV[5], 'meta', ARGV[6],
  'created_at', now)
local id = ARGV[2] .. ':' .. entry
local record = decision_record(id, ARGV[1], ARGV[3], ARGV[4], ARGV[5], ARGV[6], now)
redis.call('HSET', KEYS[11], id, record)
redis.call('HSET', KEYS[1], 'updated_at', now)
refresh_ttl(KEYS, meta[1], now, meta[2])
return id
