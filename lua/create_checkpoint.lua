--[[
  create_checkpoint: promote a snapshot of working state (all keys, or the listed ones that
  exist) to a durable checkpoint; keep it as the label's latest; log it to the wal.
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id      ARGV[2] checkpoint id      ARGV[3] label
  ARGV[4] size limit of the payload, bytes
  ARGV[5] run lease token or '' (fenced in _prelude: a stale one writes nothing)
  ARGV[6..] working-state keys to include (none = all)
  Returns: the wal entry id
  Errors:  NO_SESSION, TOO_LARGE, FENCED
  Atomic: every check runs before the first write.
]]
-- @include unchecked, fail, store_checkpoint, open_session, fenced
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(5, 1, 'ttl', 'ttl_at')
if bad then
  return bad
end
local stale = fenced(KEYS, ARGV[5])
if stale then
  return stale
end
local parts = {}
if #ARGV >= 6 then
  local names = {unpack(ARGV, 6)}
  local values = redis.call('HMGET', KEYS[2], unpack(names))
  for i, name in ipairs(names) do
    if values[i] then
      parts[#parts + 1] = cjson.encode(name) .. ':' .. values[i]
    end
  end
else
  local all = redis.call('HGETALL', KEYS[2])
  for i = 1, #all, 2 do
    parts[#parts + 1] = cjson.encode(all[i]) .. ':' .. all[i + 1]
  end
end
local payload = '{' .. table.concat(parts, ',') .. '}'
if #payload > tonumber(ARGV[4]) then
  return fail('TOO_LARGE', #payload .. ' ' .. ARGV[4])
end
return store_checkpoint(ARGV[1], ARGV[2], ARGV[3], payload, meta)
