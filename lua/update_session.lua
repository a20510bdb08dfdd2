--[[
  update_session: set meta fields (status, parent, pending, round_index, ttl), refresh
  updated_at and the idle TTL; with no fields it is a heartbeat (touch).
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   graph log values <prefix>:{p}:s:<sid>:graph (refreshed with the others)
  KEYS[11]   graph log index  <prefix>:{p}:s:<sid>:glog
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] JSON object of the changed fields as they go to the wal ('' for a touch)
  ARGV[3..] field, value pairs for the meta hash (a field set to its default is deleted:
            set_meta in _prelude)
  Returns: the wal entry id, or '' for a touch
  Errors:  NO_SESSION
  Atomic: the existence check runs before the first write.
]]
-- @include unchecked, now_ms, refresh_ttl, open_session, set_meta
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local _, bad = open_session(2, 2)
if bad then
  return bad
end
local now = now_ms()
if #ARGV > 2 then
  set_meta(KEYS[1], {unpack(ARGV, 3)}, true)
end
redis.call('HSET', KEYS[1], 'updated_at', now)
refresh_ttl(KEYS, nil, now, nil, nil, {10, 11})
if ARGV[2] == '' then
  return ''
end
local record = '{"updated_at":' .. now .. ',' .. string.sub(ARGV[2], 2)
return redis.call('XADD', KEYS[9], '*', 'op', 'session_update', 'id', ARGV[1], 'd', record)
