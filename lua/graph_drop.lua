--[[
  graph_drop: remove checkpoints from a session's graph log (see graph_put.lua for its
  layout) with their pending writes, and every channel value no remaining checkpoint
  references; log what was removed to the wal.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   graph log values   <prefix>:{p}:s:<sid>:graph
  KEYS[11]   graph log index    <prefix>:{p}:s:<sid>:glog
  KEYS[12..#KEYS-1] run indexes        <prefix>:{p}:g_run:<run_id> of the runs in ARGV (mode runs)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] mode: 'keep_latest' (all but the greatest checkpoint of each namespace),
          'all' (every checkpoint), 'runs' (checkpoints whose metadata run_id is in ARGV[3..])
  ARGV[3..] run ids (mode runs)
  Returns: the number of checkpoints removed (nothing is logged when 0)
  Errors:  NO_SESSION
]]
-- @include unchecked, now_ms, touch_graph, open_session
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(2, 1, 'ttl', 'ttl_at')
if bad then
  return bad
end
local ttl = meta[1]
local TOP = '\255'
local mode = ARGV[2]
local runs = {}
for i = 3, #ARGV do
  runs[ARGV[i]] = true
end
for i = 12, #KEYS - 1 do
  redis.call('SREM', KEYS[i], ARGV[1])
end
-- Every checkpoint, grouped by namespace, oldest first within each.
local all = redis.call('ZRANGEBYLEX', KEYS[11], '[c|', '[c|' .. TOP)
local ns_of = function(m) return string.match(m, '^c|([^|]*)|') end
local drop, keep = {}, {}
for i, m in ipairs(all) do
  local doomed
  if mode == 'all' then
    doomed = true
  elseif mode == 'keep_latest' then
    doomed = all[i + 1] ~= nil and ns_of(all[i + 1]) == ns_of(m)
  else
    local md = cjson.decode(redis.call('HGET', KEYS[10], m)).metadata
    doomed = type(md) == 'table' and md.run_id ~= nil and runs[md.run_id] == true
  end
  if doomed then
    drop[#drop + 1] = m
  else
    keep[#keep + 1] = m
  end
end
if #drop == 0 then
  return 0
end
-- Channel values still referenced by a kept checkpoint.
local referenced = {}
local namespaces = {}
for _, m in ipairs(keep) do
  namespaces['n|' .. ns_of(m)] = true
  local entry = redis.call('HGET', KEYS[10], m)
  for f in string.gmatch(string.match(entry, '"fields":"([^"]*)"') or '', '%S+') do
    referenced[f] = true
  end
end
local gone_cps, gone_writes, gone_blobs = {}, {}, {}
for _, m in ipairs(drop) do
  local prefix = 'w' .. string.sub(m, 2) .. '|'
  for _, w in ipairs(redis.call('ZRANGEBYLEX', KEYS[11], '[' .. prefix, '[' .. prefix .. TOP)) do
    redis.call('HDEL', KEYS[10], w)
    redis.call('ZREM', KEYS[11], w)
    gone_writes[#gone_writes + 1] = cjson.encode(w)
  end
  redis.call('HDEL', KEYS[10], m)
  redis.call('ZREM', KEYS[11], m)
  gone_cps[#gone_cps + 1] = cjson.encode(m)
end
for _, f in ipairs(redis.call('HKEYS', KEYS[10])) do
  if string.sub(f, 1, 2) == 'b|' and not referenced[f] then
    redis.call('HDEL', KEYS[10], f)
    gone_blobs[#gone_blobs + 1] = cjson.encode(f)
  end
end
for _, n in ipairs(redis.call('ZRANGEBYLEX', KEYS[11], '[n|', '[n|' .. TOP)) do
  if not namespaces[n] then
    redis.call('ZREM', KEYS[11], n)
  end
end
local now = now_ms()
redis.call('HSET', KEYS[1], 'updated_at', now)
touch_graph(ttl, now, meta[2])
local d = '{"at":' .. now .. ',"checkpoints":[' .. table.concat(gone_cps, ',') .. '],"writes":['
  .. table.concat(gone_writes, ',') .. '],"blobs":[' .. table.concat(gone_blobs, ',') .. ']}'
redis.call('XADD', KEYS[9], '*', 'op', 'graph_drop', 'id', ARGV[1], 'd', d)
return #drop
