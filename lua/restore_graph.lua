--[[
  restore_graph: write back a session's graph log (see graph_put.lua for its layout) from
  its durable copy, before restore_session.lua writes the session's meta (which makes the
  session, and so its graph log, live). Does nothing when the session is live. Called in
  chunks; the first chunk clears what an earlier, interrupted restore left. Writes no wal
  entry (the data came from the wal).
  KEYS[1] meta hash          <prefix>:{p}:s:<sid>
  KEYS[2] graph log values   <prefix>:{p}:s:<sid>:graph
  KEYS[3] graph log index    <prefix>:{p}:s:<sid>:glog
  KEYS[4..] run indexes      <prefix>:{p}:g_run:<run_id> of runs in this chunk's checkpoints
  ARGV[1] '1' for the first chunk, else '0'
  ARGV[2] idle TTL, seconds
  ARGV[3] session id
  ARGV[4] n, then n (field, value) pairs of the graph log values
  then m, then m index members
  Returns: 1 when written, 0 when the session was live (nothing written)
  Errors:  BAD_INPUT (counts that do not match the arguments, a TTL that is not a positive
           integer), checked before the first write
]]
-- @include fail, bad_argc
local bad_args = bad_argc(5, 1)
if bad_args then
  return bad_args
end
local n = tonumber(ARGV[4])
local m = n and n >= 0 and n == math.floor(n) and tonumber(ARGV[5 + 2 * n])
local ttl = tonumber(ARGV[2])
if not m or m < 0 or m ~= math.floor(m) or #ARGV ~= 5 + 2 * n + m
  or not ttl or ttl < 1 or ttl > 2147483647 or ttl ~= math.floor(ttl) then
  return fail('BAD_INPUT', 'restore_graph arguments do not match their counts')
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if ARGV[1] == '1' then
  redis.call('DEL', KEYS[2], KEYS[3])
end
local at = 5
for i = 0, n - 1, 400 do
  local chunk = {}
  for j = i, math.min(i + 399, n - 1) do
    chunk[#chunk + 1] = ARGV[at + 2 * j]
    chunk[#chunk + 1] = ARGV[at + 2 * j + 1]
  end
  redis.call('HSET', KEYS[2], unpack(chunk))
end
at = at + 2 * n
for i = 1, m, 400 do
  local chunk = {}
  for j = i, math.min(i + 399, m) do
    chunk[#chunk + 1] = 0
    chunk[#chunk + 1] = ARGV[at + j]
  end
  redis.call('ZADD', KEYS[3], unpack(chunk))
end
for i = 4, #KEYS do
  redis.call('SADD', KEYS[i], ARGV[3])
end
for i = 2, #KEYS do
  redis.call('EXPIRE', KEYS[i], ttl)
end
return 1
