--[[
  compact: mark messages [from, to] compacted_out (in the meta's `compacted`, the one record
  of a message's state) and append a system compact_note in one step; record the compaction
  in the audit list; log both to the wal.
  KEYS[1..9] session keys (see _prelude)
  KEYS[#KEYS] the partition's commit marker <prefix>:{p}:committed (unchecked in _prelude)
  ARGV[1] session id
  ARGV[2] from seq (>= 1)         ARGV[3] to seq (>= from, < next seq)
  ARGV[4] note body: JSON object without `at`, without its opening brace
          (see bad_message_body in _prelude)
  ARGV[5] before_tokens or ''     ARGV[6] after_tokens or ''   ARGV[7] round_index or ''
  ARGV[8] run lease token or '' (fenced in _prelude: a stale one writes nothing)
  Returns: {compact_seq, note_seq, wal entry id}
  Errors:  NO_SESSION, BAD_RANGE <from> <to> <why>, FENCED
  Invariant: meta `compacted` lists the merged compacted ranges ("a-b,c-d", ascending); the
  elements are not rewritten. load_messages and replace_message read a state from it.
  Atomic: every check runs before the first write.
]]
-- @include unchecked, clock, fail, refresh_ttl, json_num_or_null, message_element, merge_compacted
-- @include open_session, fenced
local closed = unchecked(KEYS[#KEYS], ARGV[1])
if closed then
  return closed
end
local meta, bad = open_session(8, nil, 'next_seq', 'ttl', 'last_compact_seq', 'compacted',
  'ttl_at')
if bad then
  return bad
end
local stale = fenced(KEYS, ARGV[8])
if stale then
  return stale
end
local from, to, next_seq = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(meta[1])
if from < 1 or to < from or to >= next_seq then
  return fail('BAD_RANGE', ARGV[2] .. ' ' .. ARGV[3] .. ' must satisfy 1 <= from <= to <= ' .. (next_seq - 1))
end
local now, now_text = clock()
-- the note and the audit record
local note_seq = next_seq
-- absent while 0 (META_DEFAULTS in _prelude)
local compact_seq = tonumber(meta[3] or 0) + 1
local note = message_element(now_text, ARGV[4])
redis.call('RPUSH', KEYS[3], note)
redis.call('HSET', KEYS[1], 'next_seq', note_seq + 1, 'last_compact_seq', compact_seq,
  'compacted', merge_compacted(meta[4], from, to), 'updated_at', now)
local record = '{"compact_seq":' .. compact_seq .. ',"note_seq":' .. note_seq
  .. ',"from_seq":' .. from .. ',"to_seq":' .. to
  .. ',"before_tokens":' .. json_num_or_null(ARGV[5]) .. ',"after_tokens":' .. json_num_or_null(ARGV[6])
  .. ',"round_index":' .. json_num_or_null(ARGV[7]) .. ',"created_at":' .. now .. '}'
local first_audit = redis.call('RPUSH', KEYS[6], record) == 1
refresh_ttl(KEYS, meta[2], now, meta[5], first_audit and {6} or nil)
redis.call('XADD', KEYS[9], '*', 'op', 'batch', 'msg ' .. ARGV[1] .. ' ' .. note_seq, note)
local id = redis.call('XADD', KEYS[9], '*', 'op', 'compact', 'id', ARGV[1], 'd', record)
return {compact_seq, note_seq, id}
