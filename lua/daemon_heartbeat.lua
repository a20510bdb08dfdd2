--[[
  daemon_heartbeat: renew one spill daemon's membership, drop lapsed members, and count the
  live ones (each daemon owns about partitions / members of them).
  KEYS[1] members sorted set   <prefix>:daemons   (owner id → when its heartbeat lapses, ms)
  ARGV[1] owner id
  ARGV[2] heartbeat lifetime, milliseconds ('0' = leave)
  Returns: the number of live members after the call (integer)
  Errors:  BAD_INPUT (lifetime not a whole number; checked before any write)
]]
-- @include fail
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 0 or ttl > 2147483647 or ttl ~= math.floor(ttl) then
  return fail('BAD_INPUT', 'heartbeat lifetime must be a whole number of milliseconds')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ttl == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n > 0 then
  redis.call('PEXPIRE', KEYS[1], math.max(ttl, 1000) * 4)
end
return n
