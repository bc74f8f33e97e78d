-- The helper shared by acquire.lua and adopt.lua. The loader (scripts.py) puts this file in
-- front of each script that calls it, so it is defined before the script's body runs.
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
