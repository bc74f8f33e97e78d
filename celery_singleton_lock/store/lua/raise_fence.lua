-- RAISE_FENCE: move a fencing counter up to at least a floor (a quorum client's second round,
-- when the masters that granted a lock returned different fences).
-- KEYS[1] - a fencing counter
-- ARGV[1] - floor
-- Returns the counter's value afterwards (>= the floor).
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if current < floor then
  redis.call('set', KEYS[1], floor)
  return floor
end
return current
