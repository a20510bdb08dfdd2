--[[
  dead_letter: move entries a consumer group cannot process to the partition's dead-letter
  stream and acknowledge them in the group, in one atomic step per entry.
  KEYS[1] decisions stream       <prefix>:{p}:decisions
  KEYS[2] dead-letter stream     <prefix>:{p}:decisions:dead
  ARGV[1] consumer group name
  ARGV[2] reason (free text, stored in the dead letter)
  ARGV[3..] entry ids to move (held by the calling consumer)
  Returns: the number of entries moved (ids no longer pending in the group are skipped)
  Dead letter fields: the entry's own fields, then reason, group, deliveries (times the
  group delivered it), original_id, dead_at (ms, Redis clock).
  Errors:  BAD_INPUT (an id that is not a stream entry id); a missing group is Redis'
           NOGROUP
  Atomic: each entry is checked (still pending in the group) before it is written.
]]
-- @include now_ms, fail, bad_argc
local bad_args = bad_argc(3, 1)
if bad_args then
  return bad_args
end
-- Every id is a stream id before the first write (XPENDING refuses any other).
for i = 3, #ARGV do
  if not string.find(ARGV[i], '^%d+%-%d+$') then
    return fail('BAD_INPUT', 'not a stream entry id: ' .. ARGV[i])
  end
end
local moved = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
  if #pending == 1 then
    local fields = {}
    local entry = redis.call('XRANGE', KEYS[1], id, id)
    if #entry == 1 then
      fields = entry[1][2]
    end
    table.insert(fields, 'reason')
    table.insert(fields, ARGV[2])
    table.insert(fields, 'group')
    table.insert(fields, ARGV[1])
    table.insert(fields, 'deliveries')
    table.insert(fields, pending[1][4])
    table.insert(fields, 'original_id')
    table.insert(fields, id)
    table.insert(fields, 'dead_at')
    table.insert(fields, now_ms())
    redis.call('XADD', KEYS[2], '*', unpack(fields))
    redis.call('XACK', KEYS[1], ARGV[1], id)
    moved = moved + 1
  end
end
return moved
