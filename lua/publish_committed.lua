--[[
  publish_committed: the spill daemon's fenced write of `<prefix>:{p}:committed` (the ids
  SQLite committed, and `seeded`): written only while the caller still holds the partition's
  lease. Redis losing its state takes the lease with it, so a daemon that has not noticed the
  loss yet can never re-create the marker that tells agents "a daemon checked this Redis
  against SQLite" (that is the owner's takeover, after the re-seed).
  KEYS[1] committed hash   <prefix>:{p}:committed
  KEYS[2] lease string     <prefix>:{p}:lease
  ARGV[1] the caller's lease value "<owner> <token>"
  ARGV[2..] field, value pairs to set (wal, decisions, seeded)
  Returns: 1 when written, 0 when the caller no longer holds the lease (nothing written)
]]
-- @include bad_argc
local bad_args = bad_argc(1, 2)
if bad_args then
  return bad_args
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return 1
