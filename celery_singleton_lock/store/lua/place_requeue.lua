-- PLACE_REQUEUE: a running holder that re-queued its own task (self.retry) and has finished
-- turns its place back into an enqueue place under the same token, for the retry's delivery to
-- adopt, and announces it when a waiter asked (see requeue.lua).
-- KEYS[1] - the places key
-- ARGV[1] - token
-- ARGV[2] - ttl while queued, ms
-- Returns 1 when handed back to the queue, 0 when the token holds no place.
local v = redis.call('hget', KEYS[1], ARGV[1])
local now = now_ms()
if not v or not holds(v, now) then
  return 0
end
local _, flags, _, keep, rest = place_parts(v)
local lease = now + tonumber(ARGV[2])
redis.call('hset', KEYS[1], ARGV[1], 'queued ' .. flags .. ' ' .. ms(lease) .. ' ' .. ms(keep) .. rest)
keep_alive(KEYS[1], lease - now)
announce(KEYS[1])
return 1
