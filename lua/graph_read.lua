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
  Returns: one/page: four arrays, {entries, values, write fields, writes}: the checkpoints'
           entry JSONs newest first (nil where a listed checkpoint has no entry), then the
           values of their channels (nil where absent) in entry order and each entry's
           channel order (an entry's `channels` says how many are its), then the index
           members `w|<ns>|<id>|<task>|<idx>` of ranges of writes that hold every write of
           the listed checkpoints (and may hold writes of others: the caller keeps those whose
           `w|<ns>|<id>|` names a listed checkpoint) and those writes' JSONs;
           dump: {field, value, ...}
  Errors:  NO_SESSION
  Cost: a page is a fixed number of commands whatever its length (the index range, then one
  HMGET each for the entries, their values and their writes, in chunks of CHUNK fields, and
  one ZRANGEBYLEX of writes per namespace), not four per checkpoint: in Redis 7 each
  redis.call costs a few microseconds, which made a 500-checkpoint page ~20 ms. Per
  checkpoint the script only splits its entry's field list: the reply is the commands'
  replies as they came (no table per checkpoint, nothing copied), and writes are matched
  to their checkpoints by the caller (a pattern match and a lookup per write, here, were a
  fifth of the script's instructions; callgrind).
]]
-- @include open_session
local _, bad = open_session(2, 1)
if bad then
  return bad
end
local TOP = '\255'
local CHUNK = 1000 -- fields per HMGET: unpack() of many more overflows Lua's C stack

-- The values of hash fields `fields` (false where absent), in order: HMGET's reply itself
-- when one call holds them all.
local function hmget(fields)
  if #fields == 0 then
    return {}
  end
  if #fields <= CHUNK then
    return redis.call('HMGET', KEYS[2], unpack(fields))
  end
  local out = {}
  for i = 1, #fields, CHUNK do
    local got = redis.call('HMGET', KEYS[2], unpack(fields, i, math.min(i + CHUNK - 1, #fields)))
    for j = 1, #got do
      out[#out + 1] = got[j]
    end
  end
  return out
end

-- The reply (see Returns) for index members `ms` (`c|<ns>|<id>`, newest first), which
-- are, namespace by namespace, the first n of the member lists `groups` ({list, n} each).
-- The entry's first string is its value fields, separated by one space (`"fields":"..."`,
-- free of JSON escapes and spaces by the caller's encoding), so no entry is JSON-decoded
-- here. A checkpoint's writes are the index range `w|<ns>|<id>|...`, so one range per
-- namespace, from the least `<id>|` of its listed checkpoints to the greatest (not those of
-- the least and greatest ids: an id that is a prefix of another sorts the other way once
-- `|` follows it), holds them all.
local function tuples(ms, groups)
  if #ms == 0 then
    return {{}, {}, {}, {}}
  end
  local entries = hmget(ms)
  local fields = {}
  for i = 1, #ms do
    local e = entries[i]
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
    end
  end
  local wfields
  for _, group in ipairs(groups) do
    local list = group[1]
    local low = list[1] .. '|'
    local high = low
    for i = 2, group[2] do
      local m = list[i] .. '|'
      if m < low then low = m end
      if m > high then high = m end
    end
    local got = redis.call('ZRANGEBYLEX', KEYS[3], '[w' .. string.sub(low, 2),
      '[w' .. string.sub(high, 2) .. TOP)
    if not wfields then
      wfields = got
    else
      for _, w in ipairs(got) do
        wfields[#wfields + 1] = w
      end
    end
  end
  return {entries, hmget(fields), wfields, hmget(wfields)}
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
  return tuples({m}, {{{m}, 1}})
end
local limit = tonumber(ARGV[6])
if ARGV[4] == 'ns' then
  local found = members(ARGV[3], ARGV[5], limit)
  return tuples(found, {{found, #found}})
end
-- Every namespace: each one's members newest first, then merged by checkpoint id.
local found, lists, ids, space = {}, {}, {}, {}
for _, n in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], '[n|', '[n|' .. TOP)) do
  local list = members(string.sub(n, 3), ARGV[5], limit)
  if #list > 0 then
    lists[#lists + 1] = list
    local prefix = #n + 2 -- `c|<ns>|` is one longer than `n|<ns>`
    for _, m in ipairs(list) do
      found[#found + 1] = m
      ids[m] = string.sub(m, prefix)
      space[m] = list
    end
  end
end
if #lists > 1 then
  table.sort(found, function(a, b) return ids[a] > ids[b] end)
end
for i = #found, limit + 1, -1 do
  found[i] = nil
end
-- Each namespace keeps the newest of its members.
local kept = {}
for _, m in ipairs(found) do
  kept[space[m]] = (kept[space[m]] or 0) + 1
end
local groups = {}
for _, list in ipairs(lists) do
  if kept[list] then
    groups[#groups + 1] = {list, kept[list]}
  end
end
return tuples(found, groups)
