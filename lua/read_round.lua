--[[
  read_round: the StateService export_state (read-only).
  KEYS[1] rounds hash   <prefix>:{p}:r:<uid>:<session>
  ARGV[1] round id, or '' for the latest (highest) round
  Returns: the state JSON, or false when absent
]]
-- @include bad_argc
local bad_args = bad_argc(1)
if bad_args then
  return bad_args
end
local round = ARGV[1]
if round == '' then
  round = redis.call('HGET', KEYS[1], 'max_round')
  if not round then return false end
end
return redis.call('HGET', KEYS[1], round)
