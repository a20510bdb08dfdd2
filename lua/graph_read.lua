--[[
  graph_read: read checkpoints of a session's graph log (see graph_put.lua for its layout),
  each with its channel values and pending writes (read-only).
  KEYS[1] meta hash          <prefix>:{p}:s:<sid>
  KEYS[2] graph log values   <prefix>:{p}:s:<sid>:graph
  KEYS[3] graph log index    <prefix>:{p}:s:<sid>:glog
  ARGV[1] session id
  ARGV[2] mode: 'one' | 'page' | 'dump'
    one:  ARGV[3] encoded namespace, ARGV[4] encoded checkpoint id or '' (the greatest)
    page: ARGV[3] encoded namespace or '' with ARGV[4] = 'all' (every namespace), else 'ns';
          ARGV[5] encoded checkpoint id to list below (exclusive) or ''; ARGV[6] at most this many
    dump: every field and value of the graph log
  Returns: one/page: a list, newest first, of {entry JSON, {channel value or nil, in the
           entry's channel order}, {write JSON...}}; dump: {field, value, field, value...}
  Errors:  NO_SESSION
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NO_SESSION', ARGV[1])
end
local TOP = '\255'

-- The checkpoint under index member m with its values and writes, or nil.
local function tuple(m)
  local entry = redis.call('HGET', KEYS[2], m)
  if not entry then
    return nil
  end
  local fields = {}
  for i, ch in ipairs(cjson.decode(entry).channels or {}) do
    fields[i] = ch[3]
  end
  local values = {}
  if #fields > 0 then
    values = redis.call('HMGET', KEYS[2], unpack(fields))
  end
  local prefix = 'w' .. string.sub(m, 2) .. '|'
  local wf = redis.call('ZRANGEBYLEX', KEYS[3], '[' .. prefix, '[' .. prefix .. TOP)
  local writes = {}
  if #wf > 0 then
    writes = redis.call('HMGET', KEYS[2], unpack(wf))
  end
  return {entry, values, writes}
end

-- Index members of namespace `ns` (encoded) below checkpoint `before` (or all), newest first.
local function members(ns, before, limit)
  local low = '[c|' .. ns .. '|'
  local high = '[c|' .. ns .. '|' .. TOP
  if before ~= '' then
    high = '(c|' .. ns .. '|' .. before
  end
  return redis.call('ZREVRANGEBYLEX', KEYS[3], high, low, 'LIMIT', 0, limit)
end

local mode = ARGV[2]
if mode == 'dump' then
  return redis.call('HGETALL', KEYS[2])
end
local out = {}
if mode == 'one' then
  local m
  if ARGV[4] ~= '' then
    m = 'c|' .. ARGV[3] .. '|' .. ARGV[4]
  else
    m = members(ARGV[3], '', 1)[1]
  end
  local t = m and tuple(m)
  if t then
    out[1] = t
  end
  return out
end
local limit = tonumber(ARGV[6])
local found
if ARGV[4] == 'ns' then
  found = members(ARGV[3], ARGV[5], limit)
else
  found = {}
  for _, n in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], '[n|', '[n|' .. TOP)) do
    for _, m in ipairs(members(string.sub(n, 3), ARGV[5], limit)) do
      found[#found + 1] = m
    end
  end
  -- Newest first across namespaces: by checkpoint id, the part after the second `|`.
  local function id_of(m)
    return string.match(m, '^c|[^|]*|(.*)$')
  end
  table.sort(found, function(a, b) return id_of(a) > id_of(b) end)
end
for i = 1, math.min(#found, limit) do
  local t = tuple(found[i])
  if t then
    out[#out + 1] = t
  end
end
return out
