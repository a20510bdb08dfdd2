--[[
  list_index: the ids of one session index from a lexicographic point on (read-only), as
  its buckets hold them: ascending between buckets, in no order within one.
  KEYS[1] session index   <prefix>:{p}:sessions or <prefix>:{p}:by_user:<uid>
  KEYS[2] its buckets     <index>:buckets
  ARGV[1] min, as ZRANGEBYLEX takes it: '-', '(<after id>' or '[<prefix>'
  ARGV[2] max: '+' or '[<prefix>\xff'
  ARGV[3] how many ids after the first bucket are enough (0 = all)
  Returns: strings of space-separated ids: the buckets that may hold ids between min and
           max, in order, until enough; the caller filters, sorts and cuts. An index an
           earlier build wrote (a sorted set of the ids, no '' bound) answers its ids
           between min and max, ARGV[3] of them when not 0.
]]
-- @include index_bound
local index, min, max = KEYS[1], ARGV[1], ARGV[2]
local want = tonumber(ARGV[3])
if redis.call('EXISTS', index) == 0 then
  return {}
end
if not redis.call('ZSCORE', index, '') then
  if want > 0 then
    return redis.call('ZRANGEBYLEX', index, min, max, 'LIMIT', 0, want)
  end
  return redis.call('ZRANGEBYLEX', index, min, max)
end
-- the bucket of the first id at or after min, then those after it whose bound is <= max
local from = '-'
if min ~= '-' then
  from = '[' .. index_bound(index, string.sub(min, 2))
end
local out, count, offset = {}, 0, 0
while true do
  local bounds = redis.call('ZRANGEBYLEX', index, from, max, 'LIMIT', offset, 16)
  for _, bound in ipairs(bounds) do
    local ids = redis.call('HGET', KEYS[2], bound)
    if ids then
      out[#out + 1] = ids
      if #out > 1 then
        count = count + select(2, string.gsub(ids, ' ', ' ')) - 1
      end
    end
    if want > 0 and count >= want then
      return out
    end
  end
  if #bounds < 16 then
    return out
  end
  offset = offset + 16
end
