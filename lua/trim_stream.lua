--[[
  trim_stream: the spill daemon's fenced XTRIM MINID of one of a partition's streams, done
  only while the caller still holds the partition's lease (after a Redis loss the stream is a
  new timeline whose entries are not in SQLite, whatever their ids).
  KEYS[1] stream           <prefix>:{p}:wal or <prefix>:{p}:decisions
  KEYS[2] lease string     <prefix>:{p}:lease
  ARGV[1] the caller's lease value "<owner> <token>"
  ARGV[2] the lowest id to keep
  Returns: the number of entries trimmed, or -1 when the caller no longer holds the lease
  (nothing trimmed)
]]
-- @include bad_argc
local bad_args = bad_argc(2)
if bad_args then
  return bad_args
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return -1
end
return redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2])
