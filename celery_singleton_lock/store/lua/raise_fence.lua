-- RAISE_FENCE: move a fencing counter up to at least a floor (a quorum client's second round,
-- when the masters that granted a lock returned different fences).
-- KEYS[1] - a fencing counter
-- ARGV[1] - floor
-- Returns the counter's value afterwards (>= the floor); an error when either is past 2^53
-- (exact_counter in _common.lua).
local current = tonumber(redis.call('get', KEYS[1]) or '0') or 0
local floor = tonumber(ARGV[1])
exact_counter(KEYS[1], current)
exact_counter(KEYS[1], floor)
if current < floor then
  redis.call('set', KEYS[1], floor)
  return floor
end
return current
