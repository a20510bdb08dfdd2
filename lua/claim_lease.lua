--[[
  claim_lease: acquire, renew or release the spill daemon's lease on one partition. A new
  lease gets a new fencing token (a counter that only grows), so SQLite can reject writes of
  an owner whose lease lapsed.
  KEYS[1] lease string        <prefix>:{p}:lease        ("<owner> <token>", PX expiry)
  KEYS[2] fencing counter     <prefix>:{p}:lease_token
  ARGV[1] owner id (unique per daemon instance)
  ARGV[2] lease time, milliseconds ('0' = release)
  ARGV[3] token floor: the highest token SQLite has seen (the counter is lost with Redis'
          memory, and a new token must still beat every token SQLite recorded)
  Returns: the fencing token held by this owner after the call (integer), 0 when another
  owner holds the lease or after a release
  Errors:  BAD_INPUT (lease time or floor not a whole number; checked before any write)
]]
-- @include fail, bad_argc
local bad_args = bad_argc(3)
if bad_args then
  return bad_args
end
local ttl, floor = tonumber(ARGV[2]), tonumber(ARGV[3])
if not ttl or ttl < 0 or ttl > 2147483647 or ttl ~= math.floor(ttl)
  or not floor or math.abs(floor) > 9007199254740991 or floor ~= math.floor(floor) then
  return fail('BAD_INPUT', 'lease time and token floor must be whole numbers')
end
local held = redis.call('GET', KEYS[1])
local owner, token
if held then
  owner, token = string.match(held, '^(%S+) (%d+)$')
end
if ttl == 0 then
  if owner == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 0
end
if held and owner ~= ARGV[1] then
  return 0
end
if not held then
  token = redis.call('INCR', KEYS[2])
  if token <= floor then
    token = floor + 1
    redis.call('SET', KEYS[2], token)
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. token, 'PX', ttl)
return tonumber(token)
