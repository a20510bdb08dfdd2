--[[
  check_history: the spill daemon's check of one partition's Redis history against its
  durable tier, the one write that opens a partition to agents' writes (`unchecked` in
  _prelude). Redis starts a new replication id (INFO replication, master_replid) whenever
  its data may have moved back: a replica promoted, a server restarted (from an AOF or an
  RDB, maybe an old one). A stream that holds the entry the durable tier committed last holds
  everything committed before it (replication and snapshots keep Redis' order), so Redis is
  not behind; a stream without it is, and the daemon repairs the partition before it opens
  it. Fenced: only the holder of the partition's lease writes.
  KEYS[1] commit marker   <prefix>:{p}:committed (field `history`)
  KEYS[2] lease           <prefix>:{p}:lease
  KEYS[3] wal stream      <prefix>:{p}:wal
  KEYS[4] decisions       <prefix>:{p}:decisions
  ARGV[1] the caller's lease value "<owner> <token>"
  ARGV[2] the wal id the durable tier committed last ('0-0': none)
  ARGV[3] the decisions id the durable tier committed last ('0-0': none)
  ARGV[4] '' to check the streams; after a repair, the replication id it started under: the
          partition opens without looking at the streams, unless the history changed since,
          and each stream's last id is raised to what the durable tier committed, so the ids
          Redis hands out next sort after it (the flusher reads after its cursors)
  Returns: {state, replication id}: 'open' (checked in this history already), 'checked'
           (opened now: the streams hold what the durable tier committed), 'behind' (they do
           not, or the history changed during the repair: nothing written), 'lost' (the
           caller no longer holds the lease: nothing written)
]]
-- @include bad_argc, replid
local bad_args = bad_argc(4)
if bad_args then
  return bad_args
end
local current = replid()
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {'lost', current}
end
if redis.call('HGET', KEYS[1], 'history') == current then
  return {'open', current}
end
-- Whether stream id a sorts before stream id b.
local function before(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, bm = tonumber(am), tonumber(bm)
  return am < bm or (am == bm and tonumber(as) < tonumber(bs))
end
local function holds(stream, id)
  return id == '0-0' or #redis.call('XRANGE', stream, id, id) == 1
end
if ARGV[4] == '' then
  if not (holds(KEYS[3], ARGV[2]) and holds(KEYS[4], ARGV[3])) then
    return {'behind', current}
  end
elseif ARGV[4] ~= current then
  return {'behind', current}
else
  for i, id in ipairs({ARGV[2], ARGV[3]}) do
    local stream = KEYS[2 + i]
    if id ~= '0-0' then
      local top = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
      if not top then
        -- XSETID needs the stream: an entry at the id, deleted at once, leaves it empty
        redis.call('XADD', stream, id, 'x', '')
        redis.call('XDEL', stream, id)
      elseif before(top[1], id) then
        redis.call('XSETID', stream, id)
      end
    end
  end
end
redis.call('HSET', KEYS[1], 'history', current)
return {'checked', current}
