-- Helpers shared by acquire.lua and adopt.lua. The loader (scripts.py) puts this file in
-- front of each script that calls them, so they are defined before the script's body runs.
-- It names no KEYS or ARGV of its own: the calling script passes its keys and arguments in.

-- next_fence(counter, floor): the fencing step. INCR the task's counter, and if the caller
-- proposed a floor move the counter up to it. A quorum client proposes a floor so that the
-- counters of independent masters converge; a single Redis is called without one. The
-- counter never goes down.
--   counter  the fencing counter's key
--   floor    the proposed floor (number as text), or nil / '' for none
-- Returns the fence: the counter's value afterwards.
local function next_fence(counter, floor)
  local fence = redis.call('incr', counter)
  floor = tonumber(floor or '0') or 0
  if floor > fence then
    fence = floor
    redis.call('set', counter, fence)
  end
  return fence
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
