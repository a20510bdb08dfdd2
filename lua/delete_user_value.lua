--[[
  delete_user_value: delete one user-attributed value; log a reference to the wal.
  KEYS[1] user hash    <prefix>:{p}:u:<uid>
  KEYS[2] wal stream   <prefix>:{p}:wal   (partition of the user id)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] user id      ARGV[2] key
  Returns: {1, wal entry id} when a value was removed, {0, ''} when there was none (nothing
  is logged then)
]]
-- @include unchecked, bad_argc
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(2)
if bad_args then
  return bad_args
end
if redis.call('HDEL', KEYS[1], ARGV[2]) == 0 then
  return {0, ''}
end
return {1, redis.call('XADD', KEYS[2], '*', 'op', 'user_del', 'id', ARGV[1], 'd', '{"key":"' .. ARGV[2] .. '"}')}
