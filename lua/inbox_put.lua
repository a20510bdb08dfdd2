--[[
  inbox_put: add items to a session's inbox, each under its caller-chosen item id; an id the
  inbox holds already (in any state) is left as it is, so a re-sent item is a no-op.
  New items are `pending`, numbered in the order they arrived (n), and logged to the wal in
  ONE batch entry (log_messages): fields `inbox <sid> <item id>`, the item as value.
  Items are stored as inbox_item in _prelude writes them.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   inbox hash      <prefix>:{p}:s:<sid>:inbox
  KEYS[11]   effect ledger   <prefix>:{p}:s:<sid>:effects
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id   ARGV[2] size limit of one message body, bytes
  ARGV[3..] pairs: item id, message body (a JSON object without `at`,
            validated by the caller)
  Returns: {wal entry id or '' (nothing added), then per item, in order, 1 when it was
           added, 0 when the inbox held it already}
  Errors:  NO_SESSION, TOO_LARGE, BAD_INPUT (no items, a bad item id or body), RUN_GONE
           (the inbox and ledger expired while the session lived: see run_gone in _prelude)
  Atomic: every check runs before the first write.
]]
-- @include unchecked, clock, fail, open_session, bad_limit, bad_id, bad_message_body, inbox_item
-- @include log_messages, touch_run, run_gone
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(2, 2, 'ttl', 'ttl_at', 'run_keys')
if bad then
  return bad
end
bad = bad_limit(ARGV[2])
if bad then
  return bad
end
if #ARGV < 4 then
  return fail('BAD_INPUT', 'no inbox items to put')
end
for i = 3, #ARGV, 2 do
  bad = bad_id('inbox item', ARGV[i])
    or bad_message_body(string.sub(ARGV[i + 1], 2), ARGV[2])
    or (string.byte(ARGV[i + 1], 1) ~= 123 and fail('BAD_INPUT', 'message body must be a JSON object'))
  if bad then
    return bad
  end
end
bad = run_gone(KEYS, meta[3])
if bad then
  return bad
end
local now, now_text = clock()
local n = redis.call('HLEN', KEYS[10])
local added, log = {''}, {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HEXISTS', KEYS[10], id) == 1 then
    added[#added + 1] = 0
  else
    n = n + 1
    local item = inbox_item(id, n, 'pending', '', '', now_text, ARGV[i + 1])
    redis.call('HSET', KEYS[10], id, item)
    log[#log + 1], log[#log + 2] = 'inbox ' .. ARGV[1] .. ' ' .. id, item
    added[#added + 1] = 1
  end
end
if #log > 0 then
  added[1] = log_messages(KEYS[9], log)
  if not meta[3] then
    redis.call('HSET', KEYS[1], 'run_keys', 1)
  end
end
touch_run(meta[1], now, meta[2])
return added
