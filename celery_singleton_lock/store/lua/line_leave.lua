-- LINE_LEAVE: a waiter gives up its place in the key's line (_line.lua); the first waiters are
-- told on the lock key's channel, so the next of them asks at once, and the one that is now among
-- the first ARGV[2] (the key's places) on its own channel.
-- KEYS[1] - the lock key (a places key for a key with places)
-- KEYS[2] - the line key
-- ARGV[1] - token
-- ARGV[2] - the key's places (optional, 1)
-- Returns 1 when the token was in the line, else 0.
local now = math.floor(now_us() / 1000)
local seq, mine, live = line_read(KEYS[2], now, ARGV[1])
if not mine then
  return 0
end
line_write(KEYS[2], now, seq, live)
if #live > 0 then
  redis.call('publish', KEYS[1], 'released')
  line_tell(KEYS[2], live, tonumber(ARGV[2]) or 1)
end
return 1
