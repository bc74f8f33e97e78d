-- GEN_RESERVE: a generation for a call of a key about to be published. The key's newest call is
-- left as it is: the call becomes the newest once its message is out (GEN_SUPERSEDE), or when a
-- worker holds its message (gen_verdict), so a publish that fails displaces nothing.
-- KEYS[1] - the key's generation hash (see gen_supersede.lua)
-- ARGV[1] - how long the hash lasts at least (ms): as long as the new call's message may wait
-- Returns {gen, burst_ms}: the call's generation (text: the server's clock in microseconds, lifted
-- above every one reserved before, so a store restarted empty still hands out newer ones; noted as
-- top), and how long ago the key's current burst began (ms; 0 when none is going on).
local now = now_us()
local h = redis.call('hmget', KEYS[1], 'gen', 'first', 'top')
local high = math.max(tonumber(h[1] or '0') or 0, tonumber(h[3] or '0') or 0)
local gen = now
if high >= gen then
  gen = high + 1
end
redis.call('hset', KEYS[1], 'top', string.format('%d', gen))
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
local first = tonumber(h[2] or '')
local burst_ms = 0
if first then
  burst_ms = math.max(math.floor(now / 1000) - first, 0)
end
return {string.format('%d', gen), burst_ms}
