--[[
  create_session: create a session's meta hash, index it, and log it to the wal.
  KEYS[1..9] session keys (see _prelude)
  KEYS[10]   partition session index   <prefix>:{p}:sessions
  KEYS[11]   user's session index      <prefix>:{p}:by_user:<uid> (ignored when ARGV[2] is empty)
  KEYS[12]   the daemon's commit marker <prefix>:{p}:committed
  KEYS[13]   KEYS[10]'s buckets        <prefix>:{p}:sessions:buckets
  KEYS[14]   KEYS[11]'s buckets        <prefix>:{p}:by_user:<uid>:buckets
  ARGV[1] session id          ARGV[2] user id or ''        ARGV[3] parent id or ''
  ARGV[4] spawn_depth         ARGV[5] kind (root|subagent)  ARGV[6] lifecycle
  ARGV[7] model or ''         ARGV[8] system prompt or ''   ARGV[9] config JSON
  ARGV[10] metadata JSON      ARGV[11] idle TTL, seconds
  Returns: the wal entry id
  Errors:  EXISTS when the session is live already, or indexed (expired from Redis but
           restorable from SQLite: creating it anew would replace its durable history);
           NOT_DECIDED <sid> when no spill daemon has checked this Redis history against the
           durable tier yet (unchecked in _prelude: Redis lost its state, failed over, or no
           daemon ever ran): the index cannot vouch that SQLite lacks the id, so nothing is
           created; BAD_INPUT when the idle TTL
           is not a whole number of seconds
  Atomic: the existence checks run before the first write.
]]
-- @include unchecked, now_ms, fail, refresh_ttl, json_str_or_null, bad_argc, index_upgrade, index_has
-- @include index_add, set_meta
local bad_args = bad_argc(11)
if bad_args then
  return bad_args
end
index_upgrade(KEYS[10], KEYS[13])
if ARGV[2] ~= '' then
  index_upgrade(KEYS[11], KEYS[14])
end
if redis.call('EXISTS', KEYS[1]) == 1 or index_has(KEYS[10], KEYS[13], ARGV[1]) then
  return fail('EXISTS', 'session ' .. ARGV[1])
end
local closed = unchecked(KEYS[12], ARGV[1])
if closed then
  return closed
end
local ttl = tonumber(ARGV[11])
if not ttl or ttl < 1 or ttl > 1099511627776 or ttl ~= math.floor(ttl) then
  return fail('BAD_INPUT', 'idle TTL must be a whole number of seconds')
end
local now = now_ms()
-- The fields every hot-path write reads or sets come first (ttl_at too, set just below by
-- refresh_ttl): a small hash is a listpack that HMGET/HSET scan from the front. Those at
-- their default are left out (set_meta).
local now_text = string.format('%d', now)
set_meta(KEYS[1], {
  'next_seq', '1', 'ttl', ARGV[11], 'ttl_at', '0', 'updated_at', now_text, 'version', '0',
  'user_id', ARGV[2], 'kind', ARGV[5], 'parent', ARGV[3], 'spawn_depth', ARGV[4],
  'lifecycle', ARGV[6], 'status', 'active', 'model', ARGV[7], 'system_prompt', ARGV[8],
  'config', ARGV[9], 'metadata', ARGV[10], 'created_at', now_text,
  'round_index', '0', 'last_compact_seq', '0', 'pending', '', 'compacted', ''})
refresh_ttl(KEYS, ARGV[11], now)
index_add(KEYS[10], KEYS[13], ARGV[1])
if ARGV[2] ~= '' then
  index_add(KEYS[11], KEYS[14], ARGV[1])
end
local record = '{"user_id":' .. json_str_or_null(ARGV[2]) .. ',"kind":"' .. ARGV[5]
  .. '","parent":' .. json_str_or_null(ARGV[3]) .. ',"spawn_depth":' .. ARGV[4]
  .. ',"lifecycle":"' .. ARGV[6] .. '","status":"active","model":' .. json_str_or_null(ARGV[7])
  .. ',"system_prompt":' .. json_str_or_null(ARGV[8]) .. ',"config":' .. ARGV[9]
  .. ',"metadata":' .. ARGV[10] .. ',"ttl":' .. ARGV[11] .. ',"created_at":' .. now .. '}'
return redis.call('XADD', KEYS[9], '*', 'op', 'session_create', 'id', ARGV[1], 'd', record)
