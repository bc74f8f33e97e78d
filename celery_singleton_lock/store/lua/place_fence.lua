-- PLACE_FENCE: hand the holder of a place its fencing token, while its token holds the place.
-- Every fence of a key comes from its bucket's counter (next_fence in _common.lua), whichever
-- place asks, so fences strictly increase per key across all holders.
-- KEYS[1] - the places key
-- KEYS[2] - the fencing counter of the key's bucket
-- ARGV[1] - token
-- ARGV[2] - fencing floor (optional; see next_fence in _common.lua)
-- Returns the fence, or 0 when the token holds no place (released, lapsed or never).
local v = redis.call('hget', KEYS[1], ARGV[1])
if not v or not holds(v, now_ms()) then
  return 0
end
return next_fence(KEYS[2], ARGV[2])
