--[[
  inbox_void: drop inbox items that were not delivered (pending or claimed): they become
  `void` and are never delivered; their ids stay taken (a re-sent item is still a no-op).
  Delivered, void and unknown ids are left as they are. Logged like inbox_put.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   inbox hash      <prefix>:{p}:s:<sid>:inbox
  KEYS[11]   effect ledger   <prefix>:{p}:s:<sid>:effects
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id   ARGV[2..] item ids
  Returns: {how many items were voided, wal entry id or ''}
  Errors:  NO_SESSION, BAD_INPUT (no ids), RUN_GONE (see run_gone in _prelude)
  Atomic: every check runs before the first write.
]]
-- @include unchecked, clock, fail, open_session, inbox_header, inbox_item, log_messages, touch_run
-- @include run_gone
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(1, 1, 'ttl', 'ttl_at', 'run_keys')
if bad then
  return bad
end
bad = run_gone(KEYS, meta[3])
if bad then
  return bad
end
if #ARGV < 2 then
  return fail('BAD_INPUT', 'no inbox items to void')
end
local ids = {unpack(ARGV, 2)}
local items = redis.call('HMGET', KEYS[10], unpack(ids))
local now, now_text = clock()
local log, voided, seen = {}, 0, {}
for i, id in ipairs(ids) do
  local n, state, _, _, put_at, body
  if items[i] and not seen[id] then
    seen[id] = true
    n, state, _, _, put_at, body = inbox_header(items[i])
  end
  if n and (state == 'pending' or state == 'claimed') then
    local item = inbox_item(id, n, 'void', '', '', put_at, body)
    redis.call('HSET', KEYS[10], id, item)
    log[#log + 1], log[#log + 2] = 'inbox ' .. ARGV[1] .. ' ' .. id, item
    voided = voided + 1
  end
end
local id = ''
if #log > 0 then
  id = log_messages(KEYS[9], log)
  touch_run(meta[1], now, meta[2])
end
return {voided, id}
