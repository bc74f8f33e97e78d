"""The Lua scripts of the lock protocol, one per operation.

Each script names every key it touches in ``KEYS`` (never built inside Lua),
so it runs on Redis Cluster. A lock is a hash:

    token    the holder's unique token; every compare is against it
    fence    fencing number, from the task's counter at acquire time
    task_id  holder's Celery task id (diagnostics, same-id redelivery)
    host     holder's hostname          pid   holder's process id
    since    acquire time, ms since the epoch (holder's clock)
    ttl      lease length in ms         hb    renewal period in ms
    state    "running", or "queued" for an enqueue lock not yet started
    redelivered  set when a redelivered copy of the holder's message met the lock
"""

from __future__ import annotations

__all__ = ["ACQUIRE", "RELEASE", "MARK_REDELIVERED", "RENEW", "ADOPT", "REQUEUE", "RAISE_FENCE"]

# The fencing step shared by ACQUIRE and ADOPT: INCR the task's counter, and if the caller
# proposed a floor (ARGV[n], optional) move the counter up to it. A quorum client proposes a
# floor so that the counters of independent masters converge; a single Redis is called
# without one. The counter never goes down.
_NEXT_FENCE = """
local function next_fence(counter, floor)
  local fence = redis.call('incr', counter)
  floor = tonumber(floor or '0') or 0
  if floor > fence then
    fence = floor
    redis.call('set', counter, fence)
  end
  return fence
end
"""

# ACQUIRE: take the lock if free.
#   KEYS[1] lock key   KEYS[2] fencing counter
#   ARGV[1] token  ARGV[2] ttl ms  ARGV[3] task id  ARGV[4] host  ARGV[5] pid
#   ARGV[6] since ms  ARGV[7] heartbeat ms  ARGV[8] state  ARGV[9] fencing floor (optional)
# Returns {1, fence} when taken (or already ours: asking again with the same token and state,
# after a reply lost to a broken connection, is not a conflict with ourselves), or
#   {0, task_id, host, pid, since, pttl, hb, state, token_matches} describing the holder.
ACQUIRE = _NEXT_FENCE + """
local h = redis.call('hmget', KEYS[1], 'token', 'task_id', 'host', 'pid', 'since', 'hb', 'state', 'fence')
if h[1] then
  if h[1] == ARGV[1] and h[7] == ARGV[8] then
    return {1, tonumber(h[8])}
  end
  return {0, h[2] or '', h[3] or '', h[4] or '', h[5] or '', redis.call('pttl', KEYS[1]),
          h[6] or '', h[7] or '', h[1] == ARGV[1] and 1 or 0}
end
local fence = next_fence(KEYS[2], ARGV[9])
redis.call('hset', KEYS[1], 'token', ARGV[1], 'fence', fence, 'task_id', ARGV[3], 'host', ARGV[4],
           'pid', ARGV[5], 'since', ARGV[6], 'ttl', ARGV[2], 'hb', ARGV[7], 'state', ARGV[8])
redis.call('pexpire', KEYS[1], ARGV[2])
return {1, fence}
"""

# RELEASE: delete the lock only if we still hold it, announce the release, and (optionally) note
# that the holder's task ran to the end, for later redeliveries of its message to find.
#   KEYS[1] lock key   KEYS[2] (optional) the task's set of completed task ids
#   ARGV[1] token   ARGV[2] holder's task id   ARGV[3] how long to remember it, ms
#   ARGV[4] "1" to note it even if no redelivered copy met the lock
# Returns 1 when deleted, 0 when the lock was gone or held by another token.
RELEASE = """
local h = redis.call('hmget', KEYS[1], 'token', 'redelivered')
if h[1] == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[1], 'released')
  if KEYS[2] and (h[2] or ARGV[4] == '1') then
    local now = redis.call('time')
    local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    redis.call('zremrangebyscore', KEYS[2], '-inf', ms)
    redis.call('zadd', KEYS[2], ms + tonumber(ARGV[3]), ARGV[2])
    redis.call('pexpire', KEYS[2], ARGV[3])
  end
  return 1
end
return 0
"""

# MARK_REDELIVERED: a redelivered copy of the holder's own message met the lock; note it, so the
# holder remembers at release that its task ran to the end (RELEASE above).
#   KEYS[1] lock key   ARGV[1] the holder's task id
# Returns 1 when noted, 0 when the lock is gone or held for another task.
MARK_REDELIVERED = """
if redis.call('hget', KEYS[1], 'task_id') == ARGV[1] then
  redis.call('hset', KEYS[1], 'redelivered', 1)
  return 1
end
return 0
"""

# RENEW: extend every running lock we still hold, in one call (a lock handed back to the
# queue is not ours to extend).
#   KEYS[i] lock key   ARGV[i] its token   ARGV[n + i] its ttl ms  (n = #KEYS)
# Returns a list with 1 where extended, 0 where the token is gone.
RENEW = """
local n = #KEYS
local out = {}
for i = 1, n do
  local h = redis.call('hmget', KEYS[i], 'token', 'state')
  if h[1] == ARGV[i] and h[2] == 'running' then
    redis.call('pexpire', KEYS[i], ARGV[n + i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
"""

# ADOPT: a worker takes over an enqueue lock handed to it by token, as a running lock.
#   KEYS[1] enqueue lock key   KEYS[2] running lock key (same as KEYS[1] for queued_or_running)
#   KEYS[3] fencing counter
#   ARGV[1] enqueue token  ARGV[2] new token  ARGV[3] ttl ms  ARGV[4] task id  ARGV[5] host
#   ARGV[6] pid  ARGV[7] since ms  ARGV[8] heartbeat ms  ARGV[9] fencing floor (optional)
# Returns {1, fence} when adopted (or already adopted under the new token: a repeat after a lost
# reply), {0, ...holder as ACQUIRE} when the running lock is held by someone else (its last field 1
# when that holder still runs under the enqueue token: a self.retry() not handed over yet), or {2}
# when the enqueue lock is not ours any more (expired, revoked, or adopted by another delivery of
# the same message).
ADOPT = _NEXT_FENCE + """
local mine = redis.call('hmget', KEYS[2], 'token', 'fence')
if mine[1] == ARGV[2] then
  return {1, tonumber(mine[2])}
end
local queued = redis.call('hmget', KEYS[1], 'token', 'state')
if queued[1] ~= ARGV[1] or queued[2] ~= 'queued' then
  if KEYS[1] == KEYS[2] then
    local h = redis.call('hmget', KEYS[2], 'token', 'task_id', 'host', 'pid', 'since', 'hb', 'state')
    if h[1] then
      return {0, h[2] or '', h[3] or '', h[4] or '', h[5] or '', redis.call('pttl', KEYS[2]),
              h[6] or '', h[7] or '', h[1] == ARGV[1] and 1 or 0}
    end
  end
  return {2}
end
if KEYS[1] ~= KEYS[2] then
  local h = redis.call('hmget', KEYS[2], 'token', 'task_id', 'host', 'pid', 'since', 'hb', 'state')
  if h[1] then
    return {0, h[2] or '', h[3] or '', h[4] or '', h[5] or '', redis.call('pttl', KEYS[2]),
            h[6] or '', h[7] or '', 0}
  end
  redis.call('del', KEYS[1])
end
local fence = next_fence(KEYS[3], ARGV[9])
redis.call('del', KEYS[2])
redis.call('hset', KEYS[2], 'token', ARGV[2], 'fence', fence, 'task_id', ARGV[4], 'host', ARGV[5],
           'pid', ARGV[6], 'since', ARGV[7], 'ttl', ARGV[3], 'hb', ARGV[8], 'state', 'running')
redis.call('pexpire', KEYS[2], ARGV[3])
return {1, fence}
"""

# REQUEUE: a running holder that re-queued its own task (self.retry) and has finished turns its
# lock back into an enqueue lock under the same token, for the retry's delivery to adopt, and
# announces it (that delivery may be waiting already).
#   KEYS[1] lock key   ARGV[1] token   ARGV[2] ttl ms while queued
# Returns 1 when handed back to the queue, 0 when the token is gone.
REQUEUE = """
if redis.call('hget', KEYS[1], 'token') == ARGV[1] then
  redis.call('hset', KEYS[1], 'state', 'queued', 'ttl', ARGV[2])
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('publish', KEYS[1], 'released')
  return 1
end
return 0
"""

# RAISE_FENCE: move a fencing counter up to at least a floor (a quorum client's second round,
# when the masters that granted a lock returned different fences).
#   KEYS[1] fencing counter   ARGV[1] floor
# Returns the counter's value afterwards (>= the floor).
RAISE_FENCE = """
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if current < floor then
  redis.call('set', KEYS[1], floor)
  return floor
end
return current
"""
