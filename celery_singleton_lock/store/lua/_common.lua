-- Helpers shared by acquire.lua, adopt.lua and renew.lua. The loader (scripts.py) puts this file in
-- front of each script that calls them, so they are defined before the script's body runs.
-- It names no KEYS or ARGV of its own: the calling script passes its keys and arguments in.

-- now_us(): the server's clock, in microseconds since the epoch.
local function now_us()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- next_fence(counter, floor): the fencing step. The fence is the server's clock in
-- microseconds, lifted above the task's counter (the last fence handed out) and above the
-- caller's floor, and the counter is set to it. A quorum client proposes a floor so that the
-- counters of independent masters converge; a single Redis is called without one. The clock
-- keeps fences increasing when the counter is lost (a server restarted empty, a replica
-- promoted that missed the last writes), as long as the servers' clocks do not step back.
--   counter  the fencing counter's key
--   floor    the proposed floor (number as text), or nil / '' for none
-- Returns the fence: the counter's value afterwards.
local function next_fence(counter, floor)
  local fence = now_us()
  local last = tonumber(redis.call('get', counter) or '0') or 0
  if last >= fence then
    fence = last + 1
  end
  floor = tonumber(floor or '0') or 0
  if floor > fence then
    fence = floor
  end
  redis.call('set', counter, string.format('%d', fence))
  return fence
end

-- restart_wait(counter, ttl, seen): how long grants of the task must still wait after the
-- server started without its data (ms; 0 when they need not). The caller has seen the task's
-- fencing counter on this server before (seen = '1') and it is gone: the server lost its data,
-- and with it maybe locks whose holders still run. Until a whole lease (ttl) has passed since
-- the server started, every such lock has either expired or been taken back by its live
-- holder's renewal (renew.lua), so no grant may come before. A caller that never saw the
-- counter (a fresh deployment, a new process) is not held back; a server that lost its data
-- longer than a lease ago (a flush, a failover) needs no wait.
--   counter  the task's fencing counter's key
--   ttl      the lease length in ms (number as text)
--   seen     '1' when the caller was granted a lock of the task on this server before
local function restart_wait(counter, ttl, seen)
  if seen ~= '1' or redis.call('exists', counter) == 1 then
    return 0
  end
  local up = tonumber(string.match(redis.call('info', 'server'), 'uptime_in_seconds:(%d+)') or '0')
  -- whole seconds: the server may have started up to 1 s earlier than it says
  local wait = tonumber(ttl) + 1000 - up * 1000
  if wait > 0 then
    return wait
  end
  return 0
end

-- holder_reply(key, h, same): the conflict reply that describes a lock's holder,
--   {0, task_id, host, pid, since, pttl, hb, state, token_matches}
-- with '' for a field the hash lacks and pttl the lock's remaining lease in ms.
--   key   the lock key
--   h     the reply of HMGET key token task_id host pid since hb state (any later fields unused)
--   same  a boolean: true when the holder's token is the caller's (token_matches 1, else 0).
--         Pass a boolean, not 0/1: in Lua 0 is true.
local function holder_reply(key, h, same)
  return {0, h[2] or '', h[3] or '', h[4] or '', h[5] or '', redis.call('pttl', key),
          h[6] or '', h[7] or '', same and 1 or 0}
end
