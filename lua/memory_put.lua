--[[
  memory_put: store one long-term memory item (see src/long_term.rs); the wal gets a
  reference (namespace, key), never the item, as user values do: erasing leaves no copy in a
  stream.
  KEYS[1] namespace hash     <prefix>:{p}:m:<namespace>
  KEYS[2] namespace set      <prefix>:{p}:memory_namespaces
  KEYS[3] expiry index       <prefix>:{p}:memory_expiry
  KEYS[4] wal stream         <prefix>:{p}:wal   (partition of the namespace)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] namespace (labels joined by '.')   ARGV[2] item key
  ARGV[3] value: a JSON object (validated by the caller)
  ARGV[4] vectors: a JSON object of field -> array of numbers, or ''
  ARGV[5] TTL, whole minutes, or ''          ARGV[6] size limit, bytes
  Record: {"created_at":ms,"updated_at":ms,"expires_at":ms|null,"ttl":minutes|null,
           "value":...,"vectors":...|null}; created_at is kept from the record replaced.
  Returns: the wal entry id
  Errors:  TOO_LARGE, BAD_INPUT (a TTL that is not a whole number of minutes)
]]
-- @include unchecked, clock, fail, bad_argc
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local bad_args = bad_argc(6)
if bad_args then
  return bad_args
end
local ttl = ARGV[5]
if ttl ~= '' and (#ttl > 12 or not string.find(ttl, '^%d+$')) then
  return fail('BAD_INPUT', 'memory TTL must be a whole number of minutes')
end
local size = #ARGV[3] + #ARGV[4]
if size > tonumber(ARGV[6]) then
  return fail('TOO_LARGE', size .. ' ' .. ARGV[6])
end
local now, now_text = clock()
local created = now_text
local old = redis.call('HGET', KEYS[1], ARGV[2])
if old then
  created = string.match(old, '^{"created_at":(%d+),') or now_text
end
local member = ARGV[1] .. '\n' .. ARGV[2]
local expires = 'null'
if ttl ~= '' then
  local at = now + tonumber(ttl) * 60000
  expires = string.format('%d', at)
  redis.call('ZADD', KEYS[3], at, member)
else
  redis.call('ZREM', KEYS[3], member)
  ttl = 'null'
end
local vectors = ARGV[4] ~= '' and ARGV[4] or 'null'
redis.call('HSET', KEYS[1], ARGV[2], '{"created_at":' .. created .. ',"updated_at":' .. now_text
  .. ',"expires_at":' .. expires .. ',"ttl":' .. ttl .. ',"value":' .. ARGV[3] .. ',"vectors":'
  .. vectors .. '}')
redis.call('SADD', KEYS[2], ARGV[1])
return redis.call('XADD', KEYS[4], '*', 'op', 'mem_put', 'id', ARGV[1], 'd',
  cjson.encode({key = ARGV[2]}))
