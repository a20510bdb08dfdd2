--[[
  reseed_user_values: after Redis lost its state, put one user's values back from SQLite
  without overwriting or resurrecting what agents did in the new Redis since: a value Redis
  holds stays (HSETNX); a user with a forget tombstone, or forgotten after the values were
  read from SQLite (a `user_forget` in the wal after ARGV[2]), is skipped whole; a key
  deleted after the values were read (a `user_del` of this user there) is skipped. Only the daemon that owns the partition writes: one whose lease lapsed (a new
  owner may have flushed and trimmed past ARGV[2]) writes nothing.
  KEYS[1] user hash    <prefix>:{p}:u:<uid>
  KEYS[2] tombstone    <prefix>:{p}:u:<uid>:forgotten
  KEYS[3] wal stream   <prefix>:{p}:wal   (partition of the user id)
  KEYS[4] lease        <prefix>:{p}:lease
  ARGV[1] user id
  ARGV[2] last wal id SQLite had committed when the values were read
  ARGV[3] the caller's lease value "<owner> <token>"
  ARGV[4..] (key, JSON value) pairs
  Returns: the number of values written, or -1 when the caller no longer holds the lease
  Cost: O(values + wal entries after ARGV[2]).
]]
-- @include bad_argc, keys_since
local bad_args = bad_argc(3, 2)
if bad_args then
  return bad_args
end
if redis.call('GET', KEYS[4]) ~= ARGV[3] then
  return -1
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
local deleted, forgotten = keys_since(KEYS[3], ARGV[2], ARGV[1], 'user_del', 'user_forget')
if forgotten then
  -- forgotten after the values were read (its tombstone may have expired since)
  return 0
end
local written = 0
for i = 4, #ARGV, 2 do
  if not deleted[ARGV[i]] then
    written = written + redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return written
