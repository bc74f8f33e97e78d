-- Helpers shared by fence.lua, renew.lua and the gen_*.lua scripts. The loader (scripts.py) puts this file in
-- front of each script that calls them, so they are defined before the script's body runs.
-- It names no KEYS or ARGV of its own: the calling script passes its keys and arguments in.

-- now_us(): the server's clock, in microseconds since the epoch.
local function now_us()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- exact_counter(counter, value): refuse, with an error that names the counter, a value at or past
-- 2^53 - 1, the last integer after which Lua's numbers (doubles) no longer count by one.
local function exact_counter(counter, value)
  if value >= 9007199254740991 then
    error('the fencing counter ' .. counter .. ' holds a value past 2^53, where fences would repeat: '
      .. 'it was not written by this library; delete it (fences follow the clock without it)')
  end
end

-- next_fence(counter, floor): the fencing step. The fence is the server's clock in
-- microseconds, lifted above the counter (the last fence handed out for the key's bucket) and above the
-- caller's floor, and the counter is set to it. A quorum client proposes a floor so that the
-- counters of independent masters converge; a single Redis is called without one. The clock
-- keeps fences increasing when the counter is lost (a server restarted empty, a replica
-- promoted that missed the last writes), as long as the servers' clocks do not step back.
--   counter  the fencing counter's key
--   floor    the proposed floor (number as text), or nil / '' for none
-- Returns the fence: the counter's value afterwards.
-- The counter is refused (a script error naming it) when it, or the floor, reaches 2^53 - 1: Lua's
-- numbers count by one only below 2^53, and past it a fence would repeat. The clock is far below it,
-- so only a counter someone else wrote gets there.
local function next_fence(counter, floor)
  local fence = now_us()
  local last = tonumber(redis.call('get', counter) or '0') or 0
  floor = tonumber(floor or '0') or 0
  exact_counter(counter, last)
  exact_counter(counter, floor)
  if last >= fence then
    fence = last + 1
  end
  if floor > fence then
    fence = floor
  end
  redis.call('set', counter, string.format('%d', fence))
  return fence
end

-- uptime_ms(): how long ago the server started, in ms (INFO counts whole seconds: the
-- server may have started up to 1 s before the value returned).
local function uptime_ms()
  local info = redis.call('info', 'server')
  return tonumber(string.match(info, 'uptime_in_seconds:(%d+)') or '0') * 1000
end

-- restart_window(hb): how long after the server starts a lock it may have lost can still be
-- taken back by its live holder (ms). A live holder renews within its heartbeat (hb), and its
-- renewal thread asks every second whether the server restarted (its run id) and renews at
-- once when it did; its renewals that failed while the server was down are retried within
-- a second too. So by min(hb, 1 s) after the start it has taken its lock back; a second for
-- the network and one for INFO's whole seconds come on top.
local function restart_window(hb)
  return math.min(tonumber(hb), 1000) + 2000
end

-- gen_verdict(key, gen, hold_ms): whether the call of generation gen may run, against the key's
-- generation hash (see gen_supersede.lua). A generation that claimed already 'ran' (another
-- delivery of its message). One newer than the newest the hash names was published if it was
-- reserved (at most top): its message is in hand, and its publisher has not yet made it the newest
-- (or was killed first), so it is the newest; one above top was published before the hash was
-- 'lost' (a store restarted empty, a message that outlived the TTL): other calls of its burst may
-- be waiting too. One older than the newest is 'superseded', whatever its age (a burst that never
-- goes quiet runs its newest call at lock_debounce_max, when that call's message is due). The
-- newest may 'run', unless a newer generation was reserved less than hold_ms ago: that call's
-- message may be out without its publisher having said so yet, so the verdict is 'pending' for
-- the rest of hold_ms (after which the reservation is taken for a publish that failed).
-- Returns the verdict, the newest call's task id ('' with 'run' and 'lost'), and for 'pending'
-- the ms left to wait (0 otherwise).
local function gen_verdict(key, gen, hold_ms)
  local h = redis.call('hmget', key, 'gen', 'task', 'claimed', 'top')
  local last = tonumber(h[1] or '0') or 0
  local claimed = tonumber(h[3] or '0') or 0
  local top = tonumber(h[4] or '0') or 0
  local newest = h[2] or ''
  if claimed == gen then
    return 'ran', newest, 0
  end
  if gen > top and gen > last then
    return 'lost', '', 0
  end
  if gen < last then
    return 'superseded', newest, 0
  end
  if top > gen then
    local left = hold_ms - (now_us() - top) / 1000
    if left > 0 then
      return 'pending', '', math.ceil(left)
    end
  end
  return 'run', '', 0
end
