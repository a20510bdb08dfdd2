--[[
  write_working: set, delete or clear working state and bump the session's version.
  Working state is ephemeral: nothing goes to the wal.
  KEYS[1..9] session keys (see _prelude)
  ARGV[1] session id
  ARGV[2] op: 'set', 'del' or 'clear'
  ARGV[3] working-state key ('' for clear)
  ARGV[4] JSON value (for set; validated by the caller)
  ARGV[5] expected version or '' (set_if_version)
  ARGV[6] size limit of the value, bytes
  Returns: the new version (integer)
  Errors:  NO_SESSION, TOO_LARGE, CONFLICT <expected> <current>
  Atomic: every check runs before the first write.
]]
local meta = redis.call('HMGET', KEYS[1], 'version', 'ttl', 'ttl_at')
if not meta[2] then
  return fail('NO_SESSION', ARGV[1])
end
if ARGV[2] == 'set' and #ARGV[4] > tonumber(ARGV[6]) then
  return fail('TOO_LARGE', #ARGV[4] .. ' ' .. ARGV[6])
end
if ARGV[5] ~= '' and tonumber(ARGV[5]) ~= tonumber(meta[1]) then
  return fail('CONFLICT', ARGV[5] .. ' ' .. meta[1])
end
local created = nil
if ARGV[2] == 'set' then
  if redis.call('HSET', KEYS[2], ARGV[3], ARGV[4]) == 1 then
    created = {2}
  end
elseif ARGV[2] == 'del' then
  redis.call('HDEL', KEYS[2], ARGV[3])
else
  redis.call('DEL', KEYS[2])
end
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
local now = now_ms()
redis.call('HSET', KEYS[1], 'updated_at', now)
refresh_ttl(KEYS, meta[2], now, meta[3], created)
return version
