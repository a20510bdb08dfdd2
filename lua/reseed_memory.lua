--[[
  reseed_memory: after Redis lost its state, put one long-term memory namespace's items back
  from the durable tier without overwriting or resurrecting what agents did in the new Redis
  since: an item Redis holds stays (HSETNX), an item deleted after the items were read (a
  `mem_del` of it in the wal after ARGV[2]) and an item expired by now are skipped. Only the
  daemon that owns the partition writes: one whose lease lapsed writes nothing.
  KEYS[1] namespace hash     <prefix>:{p}:m:<namespace>
  KEYS[2] namespace set      <prefix>:{p}:memory_namespaces
  KEYS[3] expiry index       <prefix>:{p}:memory_expiry
  KEYS[4] wal stream         <prefix>:{p}:wal
  KEYS[5] lease              <prefix>:{p}:lease
  ARGV[1] namespace          ARGV[2] last wal id the durable tier had committed when read
  ARGV[3] the caller's lease value "<owner> <token>"
  ARGV[4..] (key, record) pairs, records as memory_put.lua writes them
  Returns: the number of items written, or -1 when the caller no longer holds the lease
  Cost: O(items + wal entries after ARGV[2]).
]]
-- @include bad_argc, now_ms, keys_since
local bad_args = bad_argc(3, 2)
if bad_args then
  return bad_args
end
if redis.call('GET', KEYS[5]) ~= ARGV[3] then
  return -1
end
local deleted = keys_since(KEYS[4], ARGV[2], ARGV[1], 'mem_del')
local now = now_ms()
local written = 0
for i = 4, #ARGV, 2 do
  local key, record = ARGV[i], ARGV[i + 1]
  local expires = tonumber(string.match(record, '"expires_at":(%d+),'))
  if not deleted[key] and not (expires and expires <= now)
      and redis.call('HSETNX', KEYS[1], key, record) == 1 then
    written = written + 1
    if expires then
      redis.call('ZADD', KEYS[3], expires, ARGV[1] .. '\n' .. key)
    end
  end
end
if written > 0 then
  redis.call('SADD', KEYS[2], ARGV[1])
end
return written
