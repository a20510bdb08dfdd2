--[[
  memory_forget: erase the long-term memory namespaces of one partition that name a user
  (src/long_term.rs, forget_user), and log the erasure for the durable tier, which deletes
  every namespace naming the user there by the same rule.
  KEYS[1] namespace set      <prefix>:{p}:memory_namespaces
  KEYS[2] expiry index       <prefix>:{p}:memory_expiry
  KEYS[3] wal stream         <prefix>:{p}:wal
  KEYS[4..#KEYS-1] the hashes of the namespaces to erase, <prefix>:{p}:m:<namespace>
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] user id            ARGV[2] the user's label position (0 = the first label)
  ARGV[3..] the namespaces, in KEYS[4..]'s order
  Returns: the wal entry id
]]
-- @include unchecked, fail
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
if #KEYS ~= #ARGV + 2 or not string.find(ARGV[2] or '', '^%d+$') then
  return fail('BAD_INPUT', 'memory_forget takes a hash key per namespace and a label position')
end
local gone = {}
for i = 3, #ARGV do
  redis.call('DEL', KEYS[i + 1])
  redis.call('SREM', KEYS[1], ARGV[i])
  gone[ARGV[i] .. '\n'] = true
end
-- the expiry index's members of the erased namespaces (`<namespace>\n<key>`)
local members = {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if gone[string.match(m, '^[^\n]*\n')] then
    members[#members + 1] = m
  end
end
for i = 1, #members, 1000 do
  redis.call('ZREM', KEYS[2], unpack(members, i, math.min(i + 999, #members)))
end
return redis.call('XADD', KEYS[3], '*', 'op', 'mem_forget', 'id', ARGV[1], 'd',
  '{"label":' .. ARGV[2] .. '}')
