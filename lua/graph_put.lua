--[[
  graph_put: write checkpoints, channel blobs and pending writes into a session's graph
  log (a LangGraph thread), refresh the session, and log what was written to the wal.
  The graph log is one hash of values and one sorted set (score 0, ordered by member):
    hash field / index member      value
    c|<ns>|<id>  (both)            checkpoint entry JSON {"created_at","fields":"<blob field> ...",...,
                                   "channels":[[ch,ver]..]} (fields: one per channel, in order)
    b|<ns>|<ch>|<version> (hash)   a channel value (opaque string)
    w|<ns>|<id>|<task>|<idx> (both) a pending write JSON {"task_id","task_path","channel","idx","value"}
    n|<ns>  (index only)           the namespace exists
  where every <part> is percent-encoded by the caller (`%`, `|`, `"`, `\`, space, control
  characters), so `|` separates parts and a space separates the fields of "fields".
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   graph log values   <prefix>:{p}:s:<sid>:graph
  KEYS[11]   graph log index    <prefix>:{p}:s:<sid>:glog
  KEYS[12..#KEYS-1] run indexes       <prefix>:{p}:g_run:<run_id> of the runs (metadata run_id) of
             the checkpoints written: the session id is added to each
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] '1' to stamp entries with created_at (a put), '0' to store them as given (a copy)
  then three sections, each a count n and its items:
    n checkpoints  (hash field, namespace member, entry JSON: an object; stamped entries
                   without created_at)
    n blobs        (hash field, value)
    n writes       (hash field, '1' to overwrite or '0' to keep an existing one, write JSON)
  Returns: the wal entry id, or '' when nothing was written (every write was a repeat)
  Errors:  NO_SESSION, BAD_INPUT
  Atomic: every argument is read and checked before the first write.
]]
-- @include unchecked, now_ms, fail, touch_graph, open_session
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(2, 1, 'ttl', 'ttl_at')
if bad then
  return bad
end
local ttl = meta[1]
local at = 3
local function section(width)
  local n = tonumber(ARGV[at])
  if not n or n < 0 or n ~= math.floor(n) or at + n * width > #ARGV then
    return nil
  end
  local items = {}
  for i = 1, n do
    local item = {}
    for j = 1, width do
      item[j] = ARGV[at + (i - 1) * width + j]
    end
    items[i] = item
  end
  at = at + 1 + n * width
  return items
end
local cps, blobs, writes = section(3), nil, nil
if cps then blobs = section(2) end
if blobs then writes = section(3) end
if not writes or at ~= #ARGV + 1 then
  return fail('BAD_INPUT', 'graph_put arguments do not match their counts')
end
for _, c in ipairs(cps) do
  if string.sub(c[3], 1, 1) ~= '{' or string.sub(c[3], -1) ~= '}' or #c[3] < 3 then
    return fail('BAD_INPUT', 'checkpoint entry must be a non-empty JSON object')
  end
end
local now = now_ms()
local logged_cps, logged_blobs, logged_writes = {}, {}, {}
for _, c in ipairs(cps) do
  local entry = c[3]
  if ARGV[2] == '1' then
    entry = '{"created_at":' .. now .. ',' .. string.sub(entry, 2)
  end
  redis.call('HSET', KEYS[10], c[1], entry)
  redis.call('ZADD', KEYS[11], 0, c[1], 0, c[2])
  logged_cps[#logged_cps + 1] = cjson.encode(c[1]) .. ':' .. entry
end
for _, b in ipairs(blobs) do
  redis.call('HSET', KEYS[10], b[1], b[2])
  logged_blobs[#logged_blobs + 1] = cjson.encode(b[1]) .. ':' .. cjson.encode(b[2])
end
for _, w in ipairs(writes) do
  local written = true
  if w[2] == '1' then
    redis.call('HSET', KEYS[10], w[1], w[3])
  else
    written = redis.call('HSETNX', KEYS[10], w[1], w[3]) == 1
  end
  if written then
    redis.call('ZADD', KEYS[11], 0, w[1])
    logged_writes[#logged_writes + 1] = cjson.encode(w[1]) .. ':' .. w[3]
  end
end
if #logged_cps + #logged_blobs + #logged_writes == 0 then
  return ''
end
for i = 12, #KEYS - 1 do
  redis.call('SADD', KEYS[i], ARGV[1])
  redis.call('EXPIRE', KEYS[i], ttl)
end
redis.call('HSET', KEYS[1], 'updated_at', now)
touch_graph(ttl, now, meta[2])
local d = '{"at":' .. now .. ',"checkpoints":{' .. table.concat(logged_cps, ',') .. '},"blobs":{'
  .. table.concat(logged_blobs, ',') .. '},"writes":{' .. table.concat(logged_writes, ',') .. '}}'
return redis.call('XADD', KEYS[9], '*', 'op', 'graph_put', 'id', ARGV[1], 'd', d)
