--[[
  inbox_deliver: the run lease holder appends inbox items to the transcript and marks them
  delivered in the same step, so "in the transcript" and "delivered" never disagree. Each
  item becomes the next message (its body as put); an item delivered already keeps its seq
  and is not appended again. The messages and the items' new state go to ONE batch entry of
  the wal (log_messages: `msg` and `inbox` fields), so the durable tier gets both or neither.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   inbox hash      <prefix>:{p}:s:<sid>:inbox
  KEYS[11]   effect ledger   <prefix>:{p}:s:<sid>:effects
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id   ARGV[2] owner   ARGV[3] token   ARGV[4] size limit of a message, bytes
  ARGV[5..] item ids, in the order to deliver them (at most 500)
  Returns: {wal entry id or '' (nothing appended), then per item, in order, its seq}
  Errors:  NO_SESSION, FENCED (the owner does not hold the lease with that token),
           BAD_INPUT (no ids, more than 500, an id the inbox lacks or voided), TOO_LARGE,
           RUN_GONE (see run_gone in _prelude)
  Invariant: seqs stay gapless (write_message, as every append).
  Atomic: every check runs before the first write.
]]
-- @include unchecked, clock, fail, bad_limit, open_session, not_holder, inbox_header, inbox_item
-- @include bad_message_body, write_message, log_messages, refresh_ttl, run_gone
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(4, 1, 'ttl', 'ttl_at', 'next_seq', 'run_keys')
if bad then
  return bad
end
bad = bad_limit(ARGV[4])
if bad then
  return bad
end
if #ARGV < 5 or #ARGV > 504 then
  return fail('BAD_INPUT', 'deliver 1 to 500 inbox items at a time')
end
bad = not_holder(KEYS, ARGV[2], ARGV[3]) or run_gone(KEYS, meta[4])
if bad then
  return bad
end
local ids = {unpack(ARGV, 5)}
local items = redis.call('HMGET', KEYS[10], unpack(ids))
local parsed = {}
for i, id in ipairs(ids) do
  if not items[i] then
    return fail('BAD_INPUT', 'the inbox has no item ' .. id)
  end
  local n, state, _, seq, put_at, body = inbox_header(items[i])
  if not n or state == 'void' then
    return fail('BAD_INPUT', 'inbox item ' .. id .. ' was voided')
  end
  if state ~= 'delivered' then
    bad = bad_message_body(string.sub(body, 2), ARGV[4])
    if bad then
      return bad
    end
  end
  parsed[i] = {n, state, seq, put_at, body}
end
local now, now_text = clock()
local next_seq = tonumber(meta[3])
local seqs, log, created = {''}, {}, nil
local delivered = {}
for i, id in ipairs(ids) do
  local p = parsed[i]
  if p[2] == 'delivered' then
    seqs[i + 1] = tonumber(p[3])
  elseif delivered[id] then
    seqs[i + 1] = delivered[id]
  else
    local seq = next_seq
    next_seq = next_seq + 1
    local _
    _, created = write_message(KEYS, ARGV[1], seq, string.sub(p[5], 2), '', now_text, created,
      log)
    local item = inbox_item(id, p[1], 'delivered', ARGV[3], seq, p[4], p[5])
    redis.call('HSET', KEYS[10], id, item)
    log[#log + 1], log[#log + 2] = 'inbox ' .. ARGV[1] .. ' ' .. id, item
    delivered[id] = seq
    seqs[i + 1] = seq
  end
end
if #log > 0 then
  redis.call('HSET', KEYS[1], 'next_seq', next_seq, 'updated_at', now_text)
  seqs[1] = log_messages(KEYS[9], log)
end
-- the inbox and ledger expire with the session, as touch_run gives them
created = created or {}
created[#created + 1], created[#created + 2] = 10, 11
refresh_ttl(KEYS, meta[1], now, meta[2], created, {10, 11})
return seqs
