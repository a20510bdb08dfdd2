--[[
  replace_user_values: a rollback repair's write of one user's values: the hash becomes
  exactly the durable tier's pairs (none: the key goes), since Redis came back behind what
  the durable tier committed. Runs while the partition is closed to agents' writes
  (unchecked in _prelude); only the partition's lease holder writes.
  KEYS[1] user hash    <prefix>:{p}:u:<uid>
  KEYS[2] lease        <prefix>:{p}:lease
  ARGV[1] the caller's lease value "<owner> <token>"
  ARGV[2..] (key, JSON value) pairs
  Returns: the number of values written, or -1 when the caller no longer holds the lease
]]
-- @include bad_argc
local bad_args = bad_argc(1, 2)
if bad_args then
  return bad_args
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
for i = 2, #ARGV, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return (#ARGV - 1) / 2
