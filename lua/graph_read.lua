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
  Returns: one/page: the checkpoints newest first, flat: for each, its entry JSON, the number
           of its channel values and those values (nil where absent, in the entry's channel
           order), the number of its writes and the write JSONs; dump: {field, value, ...}
  Errors:  NO_SESSION
  Cost: a page is a fixed number of commands whatever its length (the index range, then one
  HMGET each for the entries, their values and their writes, in chunks of CHUNK fields, and
  one ZRANGEBYLEX of writes per namespace), not four per checkpoint: in Redis 7 each
  redis.call costs a few microseconds, which made a 500-checkpoint page ~20 ms. The reply
  is flat (no table per checkpoint): a quarter less of the script's time than nested.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NO_SESSION', ARGV[1])
end
local TOP = '\255'
local CHUNK = 1000 -- fields per HMGET: unpack() of many more overflows Lua's C stack

-- The values of hash fields `fields` (false where absent), in order.
local function hmget(fields)
  local out = {}
  for i = 1, #fields, CHUNK do
    local got = redis.call('HMGET', KEYS[2], unpack(fields, i, math.min(i + CHUNK - 1, #fields)))
    for j = 1, #got do
      out[#out + 1] = got[j]
    end
  end
  return out
end

-- The checkpoints under index members `ms` (`c|<ns>|<id>`), in that order, each with its
-- values and writes, as the flat reply (see Returns); a member without an entry is left
-- out. The entry's first string is its value fields, separated by one space
-- (`"fields":"..."`, free of JSON escapes and spaces by the caller's encoding), so no entry
-- is JSON-decoded here. A checkpoint's writes are the index range `w|<ns>|<id>|...`; one
-- range per namespace spans the writes of every listed checkpoint of it (exactly those
-- when ids have one length, as LangGraph's; the others in it are skipped).
local function tuples(ms)
  local out = {}
  if #ms == 0 then
    return out
  end
  local entries = hmget(ms)
  -- writes: a checkpoint's write list by its write prefix `w|<ns>|<id>`; lists: the same
  -- lists by the checkpoint's place in `ms`
  local fields, first, writes, lists, spans = {}, {}, {}, {}, {}
  for i, m in ipairs(ms) do
    local e = entries[i]
    first[i] = #fields + 1
    if e then
      local _, at = string.find(e, '"fields":"', 1, true)
      local stop = at and string.find(e, '"', at + 1, true) or 0
      at = (at or 0) + 1
      while at < stop do -- plain finds: string.gmatch cost ~2 us per entry
        local space = string.find(e, ' ', at, true)
        if not space or space > stop then
          space = stop
        end
        fields[#fields + 1] = string.sub(e, at, space - 1)
        at = space + 1
      end
      local w = 'w' .. string.sub(m, 2)
      writes[w] = {}
      lists[i] = writes[w]
      local low = w .. '|'
      local ns = string.match(m, '^c|([^|]*)|')
      local span = spans[ns]
      if not span then
        spans[ns] = {low, low .. TOP}
      else
        if low < span[1] then span[1] = low end
        if low .. TOP > span[2] then span[2] = low .. TOP end
      end
    end
  end
  first[#ms + 1] = #fields + 1
  local values = hmget(fields)
  local wfields, wlists = {}, {}
  for _, span in pairs(spans) do
    for _, w in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], '[' .. span[1], '[' .. span[2])) do
      local list = writes[string.match(w, '^(w|[^|]*|[^|]*)|')]
      if list then
        wfields[#wfields + 1] = w
        wlists[#wfields] = list
      end
    end
  end
  for i, value in ipairs(hmget(wfields)) do
    local list = wlists[i]
    list[#list + 1] = value
  end
  local n = 0
  for i, m in ipairs(ms) do
    if entries[i] then
      out[n + 1] = entries[i]
      out[n + 2] = first[i + 1] - first[i]
      n = n + 2
      for j = first[i], first[i + 1] - 1 do
        n = n + 1
        out[n] = values[j]
      end
      local ws = lists[i]
      n = n + 1
      out[n] = #ws
      for j = 1, #ws do
        n = n + 1
        out[n] = ws[j]
      end
    end
  end
  return out
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
if mode == 'one' then
  local m
  if ARGV[4] ~= '' then
    m = 'c|' .. ARGV[3] .. '|' .. ARGV[4]
  else
    m = members(ARGV[3], '', 1)[1]
  end
  return tuples({m})
end
local limit = tonumber(ARGV[6])
local found
if ARGV[4] == 'ns' then
  found = members(ARGV[3], ARGV[5], limit)
else
  found = {}
  local ids, spaces = {}, 0
  for _, n in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], '[n|', '[n|' .. TOP)) do
    spaces = spaces + 1
    local prefix = #n + 2 -- `c|<ns>|` is one longer than `n|<ns>`
    for _, m in ipairs(members(string.sub(n, 3), ARGV[5], limit)) do
      found[#found + 1] = m
      ids[m] = string.sub(m, prefix)
    end
  end
  -- Newest first across namespaces: by checkpoint id (one namespace is in order already).
  if spaces > 1 then
    table.sort(found, function(a, b) return ids[a] > ids[b] end)
  end
  for i = #found, limit + 1, -1 do
    found[i] = nil
  end
end
return tuples(found)
