-- GEN_SUPERSEDE: a new call of a key becomes its newest; the call it displaces, if that one has not
-- started, is superseded.
-- KEYS[1] - the key's generation hash: gen (the newest call's), task (its task id), first (when
--           the burst began, server ms; absent once a run claimed the burst), claimed (the
--           generation that claimed a run), top (the highest generation withdrawn)
-- ARGV[1] - the new call's task id
-- ARGV[2] - how long the hash lasts at least (ms): as long as the new call's message may wait
-- Returns {gen, previous, burst_ms, prior gen, prior task, prior first}: the new call's generation
-- (text: the server's clock in microseconds, lifted above the last one, so a store restarted empty
-- still hands out newer ones), the task id of the unclaimed call it supersedes ('' for none), how
-- long ago its burst began (ms; 0 for the first call of a burst), and the hash's gen, task and
-- first as they were ('' for absent): what GEN_WITHDRAW writes back if the call is not published.
local now = now_us()
local h = redis.call('hmget', KEYS[1], 'gen', 'task', 'first', 'claimed', 'top')
local last = tonumber(h[1] or '0') or 0
local gen = now
-- top: the highest generation withdrawn (gen_withdraw.lua); never handed out twice
local top = math.max(last, tonumber(h[5] or '0') or 0)
if top >= gen then
  gen = top + 1
end
local previous = ''
if last > (tonumber(h[4] or '0') or 0) and h[2] then
  previous = h[2]
end
local now_ms = math.floor(now / 1000)
local first = tonumber(h[3] or '') or now_ms
redis.call('hset', KEYS[1], 'gen', string.format('%d', gen), 'task', ARGV[1], 'first', string.format('%d', first))
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('pexpire', KEYS[1], ARGV[2])
end
return {string.format('%d', gen), previous, now_ms - first, h[1] or '', h[2] or '', h[3] or ''}
