"""The scripts that change a pool's records: each runs atomically in Redis, so a change,
its guard and the event that tells every member about it happen together or not at all.

- :data:`SUBMIT` — a new song: its record, its place in the order, its lane entry, ``added``.
- :data:`CLAIM` — a node takes a song it read from a lane (or claimed from a dead node): the
  attempt number goes up and the node is its holder. A song already finished, forgotten or
  queued again under a newer entry is acknowledged and skipped; one started too often fails.
- :data:`UPDATE` — any other change, under a guard: ``owner`` (the song is running, held by
  this node, in this attempt: the fence that keeps a node that lost its song from finishing
  it), ``live`` (queued or running), ``finished`` or ``any``; then optionally ``ack`` (the
  lane entry is done with), ``release`` (handed back: others may claim it at once),
  ``requeue`` (a new entry at the end of its lane) or ``drop`` (the record goes).
- :data:`REFRESH` — a holder's lease: its entry's idle time back to 0, while it still holds
  the song in that attempt.
"""

from __future__ import annotations

COMMON = r"""
local function record(key)
  local h = redis.call('HGETALL', key)
  local parts = {}
  for i = 1, #h, 2 do
    if string.sub(h[i], 1, 1) ~= '_' then
      parts[#parts + 1] = '"' .. h[i] .. '":' .. h[i + 1]
    end
  end
  return '{' .. table.concat(parts, ',') .. '}'
end
local function emit(events, maxlen, origin, kind, key, id)
  local body
  if key then
    local lane = redis.call('HGET', key, '_lane') or ''
    body = '{"id":"' .. id .. '","lane":"' .. lane .. '","song":' .. record(key) .. '}'
  else
    body = '{"id":"' .. id .. '"}'
  end
  redis.call('XADD', events, 'MAXLEN', '~', maxlen, '*', 'k', kind, 'o', origin, 'd', body)
end
local function drop_entry(lane, entry)
  if lane and lane ~= '' and entry and entry ~= '' then
    redis.call('XACK', lane, 'cantor', entry)
    redis.call('XDEL', lane, entry)
  end
end
"""

SUBMIT = (
    COMMON
    + r"""
-- KEYS: song, order, lane, events, seq, lanes
-- ARGV: origin, maxlen, id, field, value, ...
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('song exists') end
local seq = redis.call('INCR', KEYS[5])
redis.call('HSET', KEYS[1], 'seq', seq, '_lane', KEYS[3], '_owner', '')
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZADD', KEYS[2], seq, ARGV[3])
redis.pcall('XGROUP', 'CREATE', KEYS[3], 'cantor', '0', 'MKSTREAM')
redis.call('SADD', KEYS[6], KEYS[3])
local entry = redis.call('XADD', KEYS[3], '*', 'song', ARGV[3])
redis.call('HSET', KEYS[1], '_entry', entry)
emit(KEYS[4], ARGV[2], ARGV[1], 'added', KEYS[1], ARGV[3])
return seq
"""
)

CLAIM = (
    COMMON
    + r"""
-- KEYS: song, events, lane
-- ARGV: node id, maxlen, entry, song id, node (JSON), now (JSON), most attempts, failure
if redis.call('EXISTS', KEYS[1]) == 0 then
  drop_entry(KEYS[3], ARGV[3]); return {0, 'forgotten'}
end
local f = redis.call('HMGET', KEYS[1], 'state', '_entry', 'attempts')
if f[2] ~= ARGV[3] then drop_entry(KEYS[3], ARGV[3]); return {0, 'stale'} end
if f[1] ~= '"queued"' and f[1] ~= '"running"' then
  drop_entry(KEYS[3], ARGV[3]); return {0, 'finished'}
end
local attempts = (tonumber(f[3]) or 0) + 1
if attempts > tonumber(ARGV[7]) then
  redis.call('HSET', KEYS[1], 'state', '"failed"', 'error', ARGV[8], 'finished', ARGV[6],
    'stage', 'null', 'eta', 'null', '_owner', '')
  drop_entry(KEYS[3], ARGV[3])
  emit(KEYS[2], ARGV[2], ARGV[1], 'failed', KEYS[1], ARGV[4])
  return {0, 'too many attempts'}
end
redis.call('HSET', KEYS[1], 'state', '"running"', 'attempts', attempts, '_owner', ARGV[1],
  'node', ARGV[5], 'started', ARGV[6], 'finished', 'null', 'error', 'null', 'stage', 'null',
  'progress', '0.0', 'eta', 'null', 'takes', '[]')
emit(KEYS[2], ARGV[2], ARGV[1], 'changed', KEYS[1], ARGV[4])
return {attempts, 'claimed'}
"""
)

UPDATE = (
    COMMON
    + r"""
-- KEYS: song, events, order, seq
-- ARGV: origin, maxlen, kind, id, guard, attempt, then, release idle ms, field, value, ...
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 'null', '', '0'} end
local f = redis.call('HMGET', KEYS[1], 'state', '_owner', 'attempts', '_lane', '_entry')
local state, owner, attempts, lane, entry = f[1], f[2] or '', f[3] or '0', f[4], f[5]
local guard = ARGV[5]
local ok
if guard == 'owner' then
  ok = state == '"running"' and owner == ARGV[1] and attempts == ARGV[6]
elseif guard == 'live' then
  ok = state == '"queued"' or state == '"running"'
elseif guard == 'finished' then
  ok = state == '"done"' or state == '"failed"' or state == '"cancelled"'
else
  ok = true
end
if not ok then return {0, state, owner, attempts} end
local after = ARGV[7]
if after == 'drop' then
  drop_entry(lane, entry)
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[3], ARGV[4])
  emit(KEYS[2], ARGV[2], ARGV[1], 'removed', false, ARGV[4])
  return {1}
end
for i = 9, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
local result = {1}
if after == 'ack' then
  drop_entry(lane, entry)
  redis.call('HSET', KEYS[1], '_owner', '')
elseif after == 'release' then
  redis.call('HSET', KEYS[1], '_owner', '')
  if lane and entry and entry ~= '' then
    redis.call('XCLAIM', lane, 'cantor', owner, 0, entry, 'IDLE', ARGV[8], 'JUSTID')
  end
elseif after == 'requeue' then
  drop_entry(lane, entry)
  local seq = redis.call('INCR', KEYS[4])
  redis.call('ZADD', KEYS[3], seq, ARGV[4])
  redis.pcall('XGROUP', 'CREATE', lane, 'cantor', '0', 'MKSTREAM')
  local fresh = redis.call('XADD', lane, '*', 'song', ARGV[4])
  redis.call('HSET', KEYS[1], 'seq', seq, '_entry', fresh, '_owner', '')
  result = {1, seq}
end
emit(KEYS[2], ARGV[2], ARGV[1], ARGV[3], KEYS[1], ARGV[4])
return result
"""
)

REFRESH = r"""
-- KEYS: song, lane   ARGV: node id, attempt, entry
local f = redis.call('HMGET', KEYS[1], 'state', '_owner', 'attempts', '_entry')
if f[1] ~= '"running"' or f[2] ~= ARGV[1] or f[3] ~= ARGV[2] or f[4] ~= ARGV[3] then
  return 0
end
redis.call('XCLAIM', KEYS[2], 'cantor', ARGV[1], 0, ARGV[3], 'JUSTID')
return 1
"""
