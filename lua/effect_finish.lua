--[[
  effect_finish: record the result of a tool call begun with effect_begin; the first result
  stays (a second finish changes nothing).
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   inbox hash      <prefix>:{p}:s:<sid>:inbox
  KEYS[11]   effect ledger   <prefix>:{p}:s:<sid>:effects
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id   ARGV[2] tool call id   ARGV[3] result JSON (validated by the caller)
  ARGV[4] size limit of the result, bytes
  ARGV[5] run lease token or '' (fenced in _prelude: a stale one records nothing)
  Returns: {1, the wal entry id} when recorded, {0, ''} when the call had a result already
  Errors:  NO_SESSION, TOO_LARGE, BAD_INPUT (a call id with no intent: begin it first),
           FENCED, RUN_GONE (see run_gone in _prelude)
  Wal: an `effect` record (op effect, id sid, d the done record).
  Atomic: every check runs before the first write.
]]
-- @include unchecked, clock, fail, open_session, bad_limit, touch_run, run_gone, fenced
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(5, nil, 'ttl', 'ttl_at', 'run_keys')
if bad then
  return bad
end
bad = bad_limit(ARGV[4])
if bad then
  return bad
end
if #ARGV[3] > ARGV[4] + 0 then
  return fail('TOO_LARGE', #ARGV[3] .. ' ' .. ARGV[4])
end
bad = fenced(KEYS, ARGV[5]) or run_gone(KEYS, meta[3])
if bad then
  return bad
end
local recorded = redis.call('HGET', KEYS[11], ARGV[2])
if not recorded then
  return fail('BAD_INPUT', 'no intent recorded for tool call ' .. ARGV[2] .. ': begin it first')
end
local head, state, started = string.match(recorded,
  '^({"call_id":"[^"]*","state":)"(%a+)"(,"args_digest":"[^"]*","started_at":%d+),')
if state ~= 'running' then
  return {0, ''}
end
local now, now_text = clock()
local record = head .. '"done"' .. started .. ',"finished_at":' .. now_text .. ',"result":'
  .. ARGV[3] .. '}'
redis.call('HSET', KEYS[11], ARGV[2], record)
local id = redis.call('XADD', KEYS[9], '*', 'op', 'effect', 'id', ARGV[1], 'd', record)
touch_run(meta[1], now, meta[2])
return {1, id}
