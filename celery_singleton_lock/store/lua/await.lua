-- AWAIT: a waiter asks the lock's holder to announce its release. The waiter subscribes to the
-- channel named like the lock key first, then runs this, then waits: a release after this
-- publishes on that channel (release.lua, requeue.lua), so no release is missed; a release
-- nobody asked about publishes nothing. The ask is a flag in the lock's value (record.py:
-- 'w' among its flags), so it goes when the lock goes and needs no key of its own.
-- KEYS[1] - the lock key
-- Returns 1 when the lock is held (its release will be announced), 0 when it is free.
local v = redis.pcall('get', KEYS[1])
if not v then
  return 0
end
if type(v) ~= 'string' then
  return 1 -- not a lock value (another type): held, for its TTL
end
local head, flags, rest = string.match(v, '^(%S+ %S+) (%S+)(.*)$')
if not flags or string.find(flags, 'w', 1, true) then
  return 1 -- not a lock value this can flag, or flagged already
end
if flags == '-' then
  flags = 'w'
else
  flags = flags .. 'w'
end
redis.call('set', KEYS[1], head .. ' ' .. flags .. rest, 'keepttl')
return 1
