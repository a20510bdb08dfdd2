--[[
  close_session: physically delete one session's keys, its index entries and its open
  decisions, and log the close so the spill daemon deletes it from SQLite too.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   partition session index   <prefix>:{p}:sessions
  KEYS[11]   user's session index      <prefix>:{p}:by_user:<uid> (KEYS[10] again when no user)
  KEYS[12]   open decisions hash       <prefix>:{p}:open_decisions
  KEYS[13]   graph log values          <prefix>:{p}:s:<sid>:graph
  KEYS[14]   graph log index           <prefix>:{p}:s:<sid>:glog
  KEYS[15]   inbox hash                <prefix>:{p}:s:<sid>:inbox
  KEYS[16]   effect ledger             <prefix>:{p}:s:<sid>:effects
  KEYS[17]   KEYS[10]'s buckets        <prefix>:{p}:sessions:buckets
  KEYS[18]   KEYS[11]'s buckets
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] '1' when linked descendants are closed with it (recorded for SQLite), else '0'
  Returns: {1 if the session was live else 0, wal entry id}
  Errors:  none (closing a session that is not live still reaches SQLite through the wal)
]]
-- @include unchecked, bad_argc, index_upgrade, index_remove
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(2)
if bad_args then
  return bad_args
end
index_upgrade(KEYS[10], KEYS[17])
index_upgrade(KEYS[11], KEYS[18])
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
  KEYS[13], KEYS[14], KEYS[15], KEYS[16])
index_remove(KEYS[10], KEYS[17], ARGV[1])
index_remove(KEYS[11], KEYS[18], ARGV[1])
-- Open decisions of this session: the record starts {"id":"...","session_id":"<sid>"
-- (decision_record), so only that field is matched, never text inside the caller's meta.
local open = redis.call('HGETALL', KEYS[12])
for i = 1, #open, 2 do
  if string.match(open[i + 1], '^{"id":"[^"]*","session_id":"([^"]*)"') == ARGV[1] then
    redis.call('HDEL', KEYS[12], open[i])
  end
end
local id = redis.call('XADD', KEYS[9], '*', 'op', 'session_close', 'id', ARGV[1],
  'd', '{"cascade":' .. (ARGV[2] == '1' and 'true' or 'false') .. '}')
return {existed, id}
