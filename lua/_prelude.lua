--[[
  _prelude: helpers prepended to every script by src/scripts.rs; not a script on its own.
  Session scripts receive the session's keys as KEYS[1..9], in this order:
    KEYS[1] meta hash          <prefix>:{p}:s:<sid>
    KEYS[2] working state hash <prefix>:{p}:s:<sid>:work
    KEYS[3] message list       <prefix>:{p}:s:<sid>:msgs
    KEYS[4] checkpoint hash    <prefix>:{p}:s:<sid>:ckpt
    KEYS[5] idempotency hash   <prefix>:{p}:s:<sid>:idem
    KEYS[6] compaction list    <prefix>:{p}:s:<sid>:compactions
    KEYS[7] usage hash         <prefix>:{p}:s:<sid>:usage
    KEYS[8] children set       <prefix>:{p}:s:<sid>:children
    KEYS[9] wal stream         <prefix>:{p}:wal
  Errors are returned as `CODE detail` replies; src/error.rs maps the codes.
]]

-- Milliseconds since the epoch from the Redis clock, so skewed clients agree.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- An error reply `CODE detail` (return it from the script's top level).
local function fail(code, detail)
  return redis.error_reply(code .. ' ' .. (detail or ''))
end

-- Refreshes the idle TTL of every key of the session (KEYS[1..8]); missing keys are skipped.
local function touch_session(ttl)
  for i = 1, 8 do
    redis.call('EXPIRE', KEYS[i], ttl)
  end
end

-- Refreshes the idle TTL of a graph script's keys: the session's (KEYS[1..8]) and its graph
-- log, values in KEYS[10] and index in KEYS[11], so a thread's keys expire together.
local function touch_graph(ttl)
  touch_session(ttl)
  redis.call('EXPIRE', KEYS[10], ttl)
  redis.call('EXPIRE', KEYS[11], ttl)
end

-- A JSON string literal for s, or null when s is empty.
local function json_str_or_null(s)
  if s == nil or s == '' then return 'null' end
  return cjson.encode(s)
end

-- A JSON number for s, or null when s is empty.
local function json_num_or_null(s)
  if s == nil or s == '' then return 'null' end
  return tostring(tonumber(s))
end

-- The error reply for a message body over `limit` bytes or not a non-empty JSON object
-- (the caller built it; this is the script's own check); nil when it is fine.
local function bad_message_body(body, limit)
  if #body > tonumber(limit) then
    return fail('TOO_LARGE', #body .. ' ' .. limit)
  end
  if string.sub(body, 1, 1) ~= '{' or string.sub(body, -1) ~= '}' or #body < 3 then
    return fail('BAD_INPUT', 'message body must be a non-empty JSON object')
  end
  return nil
end

-- Stores checkpoint `id` of session `sid` under `label` with `payload` (a JSON object) as
-- the latest of its label, refreshes the session, and logs it; returns the wal entry id.
-- Session keys in KEYS[1..9]; `ttl` is the session's idle TTL.
local function store_checkpoint(sid, id, label, payload, ttl)
  local now = now_ms()
  local record = '{"id":"' .. id .. '","session_id":"' .. sid .. '","label":"' .. label
    .. '","created_at":' .. now .. ',"payload":' .. payload .. '}'
  redis.call('HSET', KEYS[4], label, record)
  redis.call('HSET', KEYS[1], 'updated_at', now)
  touch_session(tonumber(ttl))
  return redis.call('XADD', KEYS[9], '*', 'op', 'checkpoint', 'id', sid, 'd', record)
end

-- Stored message element: seq, state and created_at first, then the caller's object body.
local function message_element(seq, state, now, body)
  return '{"seq":' .. seq .. ',"state":"' .. state .. '","created_at":' .. now .. ',' .. string.sub(body, 2)
end


-- The open-decision JSON kept in <prefix>:{p}:open_decisions (record_decision, restore_session).
local function decision_record(id, sid, decision, rationale, action, meta, created_at)
  return '{"id":"' .. id .. '","session_id":"' .. sid .. '","decision":' .. cjson.encode(decision)
    .. ',"rationale":' .. cjson.encode(rationale) .. ',"planned_action":' .. json_str_or_null(action)
    .. ',"meta":' .. meta .. ',"outcome":null,"created_at":' .. created_at .. '}'
end

-- The meta `compacted` form of `compacted` ("a-b,c-d", ascending, merged) with [from, to]
-- added: overlapping or adjacent ranges merge. The one implementation of the format:
-- compact.lua adds each new range, restore_session.lua folds the audit records.
local function merge_compacted(compacted, from, to)
  local ranges = {}
  for a, b in string.gmatch(compacted or '', '(%d+)-(%d+)') do
    table.insert(ranges, {tonumber(a), tonumber(b)})
  end
  table.insert(ranges, {from, to})
  table.sort(ranges, function(x, y) return x[1] < y[1] end)
  local merged = {}
  for _, r in ipairs(ranges) do
    local last = merged[#merged]
    if last and r[1] <= last[2] + 1 then
      if r[2] > last[2] then last[2] = r[2] end
    else
      table.insert(merged, {r[1], r[2]})
    end
  end
  local parts = {}
  for _, r in ipairs(merged) do
    table.insert(parts, r[1] .. '-' .. r[2])
  end
  return table.concat(parts, ',')
end
