--[[
  load_messages: read messages in seq order in one round trip (read-only).
  KEYS[1] meta hash      <prefix>:{p}:s:<sid>
  KEYS[2] message list   <prefix>:{p}:s:<sid>:msgs
  ARGV[1] session id (for the error)
  ARGV[2] mode: 'active' (skip compacted_out), 'all', or 'one'
  ARGV[3] after seq (0 = from the start); for 'one', the seq to read
  ARGV[4] last N ('' = no limit; 0 = none), applied after the filter
  Returns: {element..., spans, compacted}: `spans` the seqs of the elements, as ascending
           ranges "a-b,c-d" ('' when none); `compacted` the meta's compacted ranges in 'all'
           and 'one' mode ('' in 'active' mode, where none is returned). An element holds
           neither its seq (its list index + 1) nor its state. The two come last, so that
           they are added to LRANGE's reply without moving it.
  Errors:  NO_SESSION
  Never transfers compacted messages in 'active' mode: it reads only the active intervals,
  the complement of the meta `compacted` ranges.
]]
-- @include open_session
local meta, bad = open_session(4, nil, 'next_seq', 'compacted')
if bad then
  return bad
end
local hi = tonumber(meta[1]) - 1
local mode, after = ARGV[2], tonumber(ARGV[3])
local last = tonumber(ARGV[4]) or 0
-- `compacted` is absent while no range is (META_DEFAULTS in _prelude)
local compacted = meta[2] or ''
if mode == 'one' then
  if after < 1 or after > hi then return {'', ''} end
  return {redis.call('LINDEX', KEYS[2], after - 1), after .. '-' .. after, compacted}
end
if ARGV[4] == '0' then return {'', ''} end
local lo = after + 1
if mode == 'all' or compacted == '' then
  if last > 0 and hi - last + 1 > lo then lo = hi - last + 1 end
  if lo > hi then return {'', ''} end
  local out = redis.call('LRANGE', KEYS[2], lo - 1, hi - 1)
  out[#out + 1] = lo .. '-' .. hi
  out[#out + 1] = mode == 'all' and compacted or ''
  return out
end
-- active intervals: [lo, hi] minus the compacted ranges
local intervals = {}
local cursor = lo
for a, b in string.gmatch(compacted, '(%d+)-(%d+)') do
  a, b = tonumber(a), tonumber(b)
  if a > cursor then
    table.insert(intervals, {cursor, math.min(a - 1, hi)})
  end
  if b + 1 > cursor then cursor = b + 1 end
  if cursor > hi then break end
end
if cursor <= hi then table.insert(intervals, {cursor, hi}) end
if last > 0 then
  local kept, count = {}, 0
  for i = #intervals, 1, -1 do
    local r = intervals[i]
    local n = r[2] - r[1] + 1
    if count + n >= last then
      table.insert(kept, 1, {r[2] - (last - count) + 1, r[2]})
      break
    end
    table.insert(kept, 1, r)
    count = count + n
  end
  intervals = kept
end
local out, spans = {}, {}
for _, r in ipairs(intervals) do
  if r[1] <= r[2] then
    spans[#spans + 1] = r[1] .. '-' .. r[2]
    local part = redis.call('LRANGE', KEYS[2], r[1] - 1, r[2] - 1)
    for _, element in ipairs(part) do
      out[#out + 1] = element
    end
  end
end
out[#out + 1] = table.concat(spans, ',')
out[#out + 1] = ''
return out
