-- PLACE_RELEASE: give back our place; it stays, released, until its window ends (its lease end
-- field then says when it was released, for `celery locks show`). Announce it
-- when a waiter asked (~w), and (optionally) note that the holder's task ran to the end, as
-- release.lua does.
-- KEYS[1] - the places key
-- KEYS[2] - the set of completed task ids of the key's bucket (optional)
-- ARGV[1] - token
-- ARGV[2] - the state the caller lets go of: "running", or "queued" (an enqueue place): a
--           place in the other state is not the caller's to give back, whatever its token
-- ARGV[3] - the holder's task id
-- ARGV[4] - how long to remember it, ms
-- ARGV[5] - "1" to note it even if no redelivered copy met the place
-- Returns 1 when given back, 0 when the token held no place in that state (released, lapsed,
-- handed on, or never).
local v = redis.call('hget', KEYS[1], ARGV[1])
if not v then
  return 0
end
local now = now_ms()
if not holds(v, now) then
  return 0
end
local state, flags, _, keep, rest = place_parts(v)
if state ~= ARGV[2] then
  return 0
end
if keep > now then
  redis.call('hset', KEYS[1], ARGV[1], 'released ' .. flags .. ' ' .. ms(now) .. ' ' .. ms(keep) .. rest)
else
  redis.call('hdel', KEYS[1], ARGV[1])
end
announce(KEYS[1])
refit(KEYS[1], now)
if KEYS[2] and (ARGV[5] == '1' or string.find(flags, 'r', 1, true)) then
  redis.call('zremrangebyscore', KEYS[2], '-inf', now)
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[4]), ARGV[3])
  redis.call('pexpire', KEYS[2], ARGV[4])
end
return 1
