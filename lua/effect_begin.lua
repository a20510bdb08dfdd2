--[[
  effect_begin: record the intent to run a tool call with a side effect, once per tool call
  id in the session's effect ledger; or say what is recorded for it. The first caller gets
  `started` and runs the tool; every later one (a resumed run, a concurrent recorder) gets
  the record instead: `done` with the result, or `running` (begun, no result yet: running
  elsewhere, or its process died and the caller must reconcile). Ledger records:
    {"call_id","state":"running"|"done","args_digest","started_at","finished_at","result"}
  (finished_at and result null while running; result is the caller's JSON, last).
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   inbox hash      <prefix>:{p}:s:<sid>:inbox
  KEYS[11]   effect ledger   <prefix>:{p}:s:<sid>:effects
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id   ARGV[2] tool call id   ARGV[3] digest of the call's arguments
  ARGV[4] run lease token or '' (fenced in _prelude: a stale one records nothing)
  Returns: {'started'|'running'|'done', the record, the wal entry id ('' unless started)}
  Errors:  NO_SESSION, BAD_INPUT (a bad call id or digest), ARGS_DIFFER <call id> <recorded
           digest> (the call was begun with other arguments), FENCED, RUN_GONE (see
           run_gone in _prelude)
  Wal: a new intent is an `effect` record (op effect, id sid, d the record).
  Atomic: every check runs before the first write.
]]
-- @include unchecked, clock, fail, open_session, bad_id, touch_run, run_gone, fenced
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(4, nil, 'ttl', 'ttl_at', 'run_keys')
if bad then
  return bad
end
bad = bad_id('tool call', ARGV[2])
if bad then
  return bad
end
if #ARGV[3] < 1 or #ARGV[3] > 200 or not string.find(ARGV[3], '^[%w:%-_]+$') then
  return fail('BAD_INPUT', 'arguments digest must be 1-200 characters of [A-Za-z0-9:_-]')
end
bad = fenced(KEYS, ARGV[4]) or run_gone(KEYS, meta[3])
if bad then
  return bad
end
local recorded = redis.call('HGET', KEYS[11], ARGV[2])
if recorded then
  local state, digest = string.match(recorded, '^{"call_id":"[^"]*","state":"(%a+)","args_digest":"([^"]*)"')
  if digest ~= ARGV[3] then
    return fail('ARGS_DIFFER', ARGV[2] .. ' ' .. tostring(digest))
  end
  return {state, recorded, ''}
end
local now, now_text = clock()
local record = '{"call_id":"' .. ARGV[2] .. '","state":"running","args_digest":"' .. ARGV[3]
  .. '","started_at":' .. now_text .. ',"finished_at":null,"result":null}'
redis.call('HSET', KEYS[11], ARGV[2], record)
if not meta[3] then
  redis.call('HSET', KEYS[1], 'run_keys', 1)
end
local id = redis.call('XADD', KEYS[9], '*', 'op', 'effect', 'id', ARGV[1], 'd', record)
touch_run(meta[1], now, meta[2])
return {'started', record, id}
