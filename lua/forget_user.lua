--[[
  forget_user: GDPR erasure of a user's data in Redis, O(that user's keys); the wal entry
  tells the spill daemon to erase it from SQLite. Sessions, checkpoints and decisions are
  not touched. A short-lived tombstone keeps the daemon's re-seed after a Redis loss from
  putting back values SQLite still holds until it applies the wal entry.
  KEYS[1] user hash    <prefix>:{p}:u:<uid>
  KEYS[2] wal stream   <prefix>:{p}:wal   (partition of the user id)
  KEYS[3] tombstone    <prefix>:{p}:u:<uid>:forgotten   (value: forget time, ms)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] user id
  ARGV[2] tombstone TTL, seconds
  Returns: {names of the removed keys, wal entry id}
  Errors:  BAD_INPUT (the TTL is not a whole number of seconds in 1..2^31)
  Atomic: the TTL is checked before the first write.
]]
-- @include unchecked, now_ms, fail, bad_argc
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(2)
if bad_args then
  return bad_args
end
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 1 or ttl > 2147483648 or ttl ~= math.floor(ttl) then
  return fail('BAD_INPUT', 'tombstone TTL must be a whole number of seconds')
end
local names = redis.call('HKEYS', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[3], now_ms(), 'EX', ttl)
local id = redis.call('XADD', KEYS[2], '*', 'op', 'user_forget', 'id', ARGV[1], 'd', '{"keys":' .. #names .. '}')
return {names, id}
