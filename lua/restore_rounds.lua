--[[
  restore_rounds: rehydrate one StateService rounds hash from its durable copy; does nothing
  when the hash is live.
  KEYS[1] rounds hash   <prefix>:{p}:r:<uid>:<session>   (no TTL, like save_round's)
  ARGV[1] max_round
  ARGV[2..] (round id, state JSON) pairs
  Returns: 1 when restored, 0 when the hash was live already
]]
-- @include bad_argc
local bad_args = bad_argc(1, 2)
if bad_args then
  return bad_args
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'max_round', ARGV[1])
return 1
