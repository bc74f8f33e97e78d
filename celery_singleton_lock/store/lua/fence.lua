-- FENCE: hand the holder of a lock its fencing token, while its token still holds the lock.
-- Every fence of a key comes from its bucket's counter (next_fence in _common.lua), so a
-- fence handed out while the token holds the key is larger than every fence an earlier
-- holder of the key was handed.
-- KEYS[1] - the lock key
-- KEYS[2] - the fencing counter of the key's bucket
-- ARGV[1] - token
-- ARGV[2] - fencing floor (optional; see next_fence in _common.lua)
-- Returns the fence, or 0 when the token does not hold the lock (gone, or another holder's).
local v = redis.call('get', KEYS[1])
if not v or string.match(v, '^(%S+)') ~= ARGV[1] then
  return 0
end
return next_fence(KEYS[2], ARGV[2])
