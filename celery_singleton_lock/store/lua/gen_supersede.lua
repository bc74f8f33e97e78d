-- GEN_SUPERSEDE: a call whose message is published becomes its key's newest; the call it displaces,
-- if that one has not started, is superseded.
-- KEYS[1] - the key's generation hash: gen (the newest call's), task (its task id), first (when
--           the burst began, server ms; absent once a run claimed the burst), claimed (the
--           generation that claimed a run), top (the highest generation reserved, GEN_RESERVE)
-- ARGV[1] - the call's generation (text, from GEN_RESERVE)
-- ARGV[2] - the call's task id
-- ARGV[3] - how long the hash lasts at least (ms): as long as the call's message may wait
-- Returns the task id of the unclaimed call it supersedes ('' for none). Nothing changes when the
-- hash names this call or a newer one already (a worker took its message first, or a newer call's
-- publish finished first).
local gen = tonumber(ARGV[1])
local h = redis.call('hmget', KEYS[1], 'gen', 'task', 'first', 'claimed')
local last = tonumber(h[1] or '0') or 0
if gen <= last then
  return ''
end
local previous = ''
if last > (tonumber(h[4] or '0') or 0) and h[2] then
  previous = h[2]
end
local first = h[3] or string.format('%d', math.floor(now_us() / 1000))
redis.call('hset', KEYS[1], 'gen', ARGV[1], 'task', ARGV[2], 'first', first)
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('pexpire', KEYS[1], ARGV[3])
end
return previous
