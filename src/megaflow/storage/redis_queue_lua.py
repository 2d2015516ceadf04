"""The Lua scripts behind :class:`megaflow.storage.redis_queue.RedisTaskQueue`.

Each queue operation is one script, so it is atomic and costs one round
trip. Layout, under the namespace's hash-tagged prefix ``P``:

- ``P q:lanes``: sorted set of the priorities that have a lane, scored by
  ``-priority`` so the first member is the highest priority;
- ``P q:lane:<priority>``: one stream per priority, consumer group
  ``megaflow``; entry order is arrival order;
- ``P q:queued``: hash ``task id -> "<priority> <entry id>"`` of entries not
  yet delivered; ``P q:pending``: the same for entries delivered to a
  consumer and not yet acknowledged.

Lane streams are named inside the scripts rather than passed as ``KEYS``
because which lanes exist is only known inside the script. They share the
declared keys' hash tag, so they live in the same cluster slot, which is
what Redis Cluster checks for every key a script touches.

Common arguments: ``KEYS = [lanes, queued, pending]``,
``ARGV[1] = prefix``, ``ARGV[2] = group``.
"""

from __future__ import annotations

PRELUDE = """
local P, GROUP = ARGV[1], ARGV[2]
local LANES, QUEUED, PENDING = KEYS[1], KEYS[2], KEYS[3]

local function lane_key(prio) return P .. 'q:lane:' .. prio end

local function split(v)
  local sp = string.find(v, ' ', 1, true)
  return string.sub(v, 1, sp - 1), string.sub(v, sp + 1)
end

local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return false
end

-- Drop one entry (delivered or not); an emptied lane goes with its group.
local function drop(prio, entry)
  local lane = lane_key(prio)
  redis.call('XACK', lane, GROUP, entry)
  redis.call('XDEL', lane, entry)
  if redis.call('XLEN', lane) == 0 then
    redis.call('DEL', lane)
    redis.call('ZREM', LANES, prio)
  end
end
"""

# ARGV[3..]: (task id, priority, seq, spec json) per item.
PUSH = """
local added = 0
for i = 3, #ARGV, 4 do
  local id, prio, seq, spec = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if redis.call('HEXISTS', QUEUED, id) == 0 then
    -- pushing an id that was delivered but not acknowledged supersedes that
    -- delivery: the id is never in the queue twice
    local old = redis.call('HGET', PENDING, id)
    if old then
      redis.call('HDEL', PENDING, id)
      drop(split(old))
    end
    local lane = lane_key(prio)
    if not redis.call('ZSCORE', LANES, prio) then
      redis.pcall('XGROUP', 'CREATE', lane, GROUP, '0', 'MKSTREAM')
      redis.call('ZADD', LANES, -tonumber(prio), prio)
    end
    local entry = redis.call('XADD', lane, '*', 'id', id, 'seq', seq, 'spec', spec)
    redis.call('HSET', QUEUED, id, prio .. ' ' .. entry)
    added = added + 1
  end
end
return added
"""

# ARGV[3] consumer, ARGV[4] n, ARGV[5] min idle ms before a pending entry is
# claimed from its (presumed crashed) consumer. Returns [seq, spec, ...].
POP = """
local consumer, want, idle = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local out = {}
local function take(prio, entry, fields)
  local id = field(fields, 'id')
  redis.call('HDEL', QUEUED, id)
  redis.call('HSET', PENDING, id, prio .. ' ' .. entry)
  out[#out + 1] = field(fields, 'seq')
  out[#out + 1] = field(fields, 'spec')
  want = want - 1
end
for _, prio in ipairs(redis.call('ZRANGE', LANES, 0, -1)) do
  if want <= 0 then break end
  local lane = lane_key(prio)
  local cursor = '0-0'
  repeat
    local r = redis.call('XAUTOCLAIM', lane, GROUP, consumer, idle, cursor, 'COUNT', want)
    cursor = r[1]
    for _, e in ipairs(r[2]) do
      if e then take(prio, e[1], e[2]) end
    end
  until cursor == '0-0' or want <= 0
  if want > 0 then
    local r = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', want,
                         'STREAMS', lane, '>')
    if r then
      for _, e in ipairs(r[1][2]) do take(prio, e[1], e[2]) end
    end
  end
end
return out
"""

# ARGV[3] n, ARGV[4] min idle ms. What POP would return, without taking it.
PEEK = """
local want, idle = tonumber(ARGV[3]), ARGV[4]
local out = {}
local function add(e)
  out[#out + 1] = field(e[2], 'seq')
  out[#out + 1] = field(e[2], 'spec')
  want = want - 1
end
for _, prio in ipairs(redis.call('ZRANGE', LANES, 0, -1)) do
  if want <= 0 then break end
  local lane = lane_key(prio)
  for _, p in ipairs(redis.call('XPENDING', lane, GROUP, 'IDLE', idle, '-', '+', want)) do
    local e = redis.call('XRANGE', lane, p[1], p[1])[1]
    if e then add(e) end
  end
  if want > 0 then
    local last = '0-0'
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', lane)) do
      if field(g, 'name') == GROUP then last = field(g, 'last-delivered-id') end
    end
    for _, e in ipairs(redis.call('XRANGE', lane, '(' .. last, '+', 'COUNT', want)) do
      add(e)
    end
  end
end
return out
"""

# ARGV[3] min idle ms. Entries a pop could take now.
SIZE = """
local n = redis.call('HLEN', QUEUED)
for _, prio in ipairs(redis.call('ZRANGE', LANES, 0, -1)) do
  n = n + #redis.call('XPENDING', lane_key(prio), GROUP, 'IDLE', ARGV[3], '-', '+', 1000000)
end
return n
"""

# ARGV[3..] task ids. Cancellation: queued and unacknowledged entries alike.
REMOVE = """
local found = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local hash = QUEUED
  local v = redis.call('HGET', QUEUED, id)
  if not v then
    hash = PENDING
    v = redis.call('HGET', PENDING, id)
  end
  if v then
    redis.call('HDEL', hash, id)
    drop(split(v))
    found = found + 1
  end
end
return found
"""

# ARGV[3..] task ids delivered to a consumer and now recorded by it.
ACK = """
local acked = 0
for i = 3, #ARGV do
  local v = redis.call('HGET', PENDING, ARGV[i])
  if v then
    redis.call('HDEL', PENDING, ARGV[i])
    drop(split(v))
    acked = acked + 1
  end
end
return acked
"""
