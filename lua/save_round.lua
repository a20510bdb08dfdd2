--[[
  save_round: the StateService save_state: store a state snapshot under a round id
  (max + 1 when none is given, 1 when empty; an explicit id overwrites); log it to the wal.
  KEYS[1] rounds hash   <prefix>:{p}:r:<uid>:<session>  (round id -> state JSON, plus max_round)
  KEYS[2] wal stream    <prefix>:{p}:wal                (partition of the user id)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] user id       ARGV[2] session id (StateService's, default "default")
  ARGV[3] round id or '' (at most 2^53 - 1, checked by the caller)
  ARGV[4] state JSON (validated by the caller)
  ARGV[5] size limit, bytes
  The hash has no TTL: it is durable state whose max_round must not be forgotten (after an
  expiry a new save would start again at round 1 and overwrite SQLite's round 1).
  Returns: {round id, wal entry id}
  Errors:  TOO_LARGE
  Atomic: every check runs before the first write.
]]
-- @include unchecked, now_ms, fail, bad_argc
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(5)
if bad_args then
  return bad_args
end
if #ARGV[4] > tonumber(ARGV[5]) then
  return fail('TOO_LARGE', #ARGV[4] .. ' ' .. ARGV[5])
end
local max = tonumber(redis.call('HGET', KEYS[1], 'max_round') or '0')
local round = max + 1
if ARGV[3] ~= '' then round = tonumber(ARGV[3]) end
redis.call('HSET', KEYS[1], round, ARGV[4])
if round > max then
  redis.call('HSET', KEYS[1], 'max_round', round)
end
local record = '{"user_id":"' .. ARGV[1] .. '","session_id":"' .. ARGV[2] .. '","round_id":' .. string.format('%d', round)
  .. ',"created_at":' .. now_ms() .. ',"state":' .. ARGV[4] .. '}'
local id = redis.call('XADD', KEYS[2], '*', 'op', 'round', 'id', ARGV[1], 'd', record)
return {round, id}
