--[[
  publish_committed: the spill daemon's fenced write of `<prefix>:{p}:committed` (the ids
  SQLite committed, and `seeded`): written only while the caller still holds the partition's
  lease. Redis losing its state takes the lease with it, so a daemon that has not noticed the
  loss yet can never re-create the marker that tells agents "a daemon checked this Redis
  against SQLite" (that is the owner's takeover, after the re-seed). Then it rings the commit
  bell (a one-entry stream), which wakes the durable callers blocked on it (`XREAD BLOCK`);
  the bell's entry carries the same field, value pairs and the marker's `history`, so a
  woken caller reads its commit, and the Redis history it was published in, from the wake
  itself.
  KEYS[1] committed hash   <prefix>:{p}:committed
  KEYS[2] lease string     <prefix>:{p}:lease
  KEYS[3] commit bell      <prefix>:{p}:commit_bell
  ARGV[1] the caller's lease value "<owner> <token>"
  ARGV[2..] field, value pairs to set (wal, decisions, seeded)
  Returns: the Redis clock (ms) when written, so the caller measures the write-behind window
  on the clock that stamped the entries; 0 when the caller no longer holds the lease (nothing
  written)
]]
-- @include bad_argc
-- @include now_ms
local bad_args = bad_argc(1, 2)
if bad_args then
  return bad_args
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
local history = redis.call('HGET', KEYS[1], 'history')
if history then
  redis.call('XADD', KEYS[3], 'MAXLEN', '1', '*', 'history', history, unpack(ARGV, 2))
else
  redis.call('XADD', KEYS[3], 'MAXLEN', '1', '*', unpack(ARGV, 2))
end
return now_ms()
