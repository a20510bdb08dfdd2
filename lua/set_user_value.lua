--[[
  set_user_value: store one user-attributed value; the wal gets a reference (user, key),
  never the value, so forgetting the user leaves no copy in any stream.
  KEYS[1] user hash    <prefix>:{p}:u:<uid>
  KEYS[2] wal stream   <prefix>:{p}:wal   (partition of the user id)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] user id      ARGV[2] key      ARGV[3] JSON value (validated by the caller)
  ARGV[4] size limit, bytes
  Returns: the wal entry id
  Errors:  TOO_LARGE
]]
-- @include unchecked, fail, bad_argc
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(4)
if bad_args then
  return bad_args
end
if #ARGV[3] > tonumber(ARGV[4]) then
  return fail('TOO_LARGE', #ARGV[3] .. ' ' .. ARGV[4])
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
return redis.call('XADD', KEYS[2], '*', 'op', 'user_set', 'id', ARGV[1], 'd', '{"key":"' .. ARGV[2] .. '"}')
