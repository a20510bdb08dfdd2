--[[
  index_sessions: add sessions to a partition's indexes (the daemon re-adds those the durable
  tier holds after Redis lost them), and turn indexes an earlier build wrote into buckets.
  KEYS[1], KEYS[2]          the partition's session index and its buckets
                            (<prefix>:{p}:sessions, <prefix>:{p}:sessions:buckets), or with no
                            ARGV any session index to upgrade and its buckets
  KEYS[2i+1], KEYS[2i+2]    the index of session i's user and its buckets, or KEYS[1] and
                            KEYS[2] again when it has none
  ARGV[i]                   session id i
  Returns: with ARGV, how many ids were not in the partition index; without, 1 when the
           index was upgraded, else 0
  Errors:  BAD_INPUT (KEYS not two per id and two more, or an id that is not one; nothing
           written)
]]
-- @include fail, index_upgrade, index_add
if #KEYS ~= 2 * #ARGV + 2 then
  return fail('BAD_INPUT', 'expected ' .. (2 * #ARGV + 2) .. ' keys, got ' .. #KEYS)
end
for _, sid in ipairs(ARGV) do
  -- a space would split a bucket's id in two
  if #sid > 128 or not string.find(sid, '^[%w._@+-]+$') then
    return fail('BAD_INPUT', 'not a session id: ' .. sid)
  end
end
local upgraded = 0
for i = 1, #KEYS, 2 do
  upgraded = upgraded + index_upgrade(KEYS[i], KEYS[i + 1])
end
if #ARGV == 0 then
  return upgraded
end
local added = 0
for i, sid in ipairs(ARGV) do
  added = added + index_add(KEYS[1], KEYS[2], sid)
  if KEYS[2 * i + 1] ~= KEYS[1] then
    index_add(KEYS[2 * i + 1], KEYS[2 * i + 2], sid)
  end
end
return added
