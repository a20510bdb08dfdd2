--[[
  forget_user: GDPR erasure of a user's data in Redis, O(that user's keys); the wal entry
  tells the spill daemon to erase it from SQLite. Sessions, checkpoints and decisions are
  not touched.
  KEYS[1] user hash    <prefix>:{p}:u:<uid>
  KEYS[2] wal stream   <prefix>:{p}:wal   (partition of the user id)
  ARGV[1] user id
  Returns: {names of the removed keys, wal entry id}
]]
local names = redis.call('HKEYS', KEYS[1])
redis.call('DEL', KEYS[1])
local id = redis.call('XADD', KEYS[2], '*', 'op', 'user_forget', 'id', ARGV[1], 'd', '{"keys":' .. #names .. '}')
return {names, id}
