-- PLACE_AWAIT: a waiter asks for the next place let go to be announced (see await.lua). The
-- waiter subscribes to the channel named like the places key first, then runs this, then
-- waits; a release, a hand-back or an adoption after this publishes there.
-- KEYS[1] - the places key
-- Returns 1 when every place is taken (the next release will be announced), 0 when one is free.
local _, count = survey(KEYS[1], now_ms(), '')
if count < tonumber(redis.call('hget', KEYS[1], '~n') or '1') then
  return 0
end
redis.call('hset', KEYS[1], '~w', '1')
return 1
