-- MARK_REDELIVERED: a redelivered copy of the holder's own message met the lock; note it, so
-- the holder remembers at release that its task ran to the end (see release.lua).
-- KEYS[1] - the lock key
-- ARGV[1] - the holder's task id (the value's last field, up to a tab and the call's description)
-- Returns 1 when noted, 0 when the lock is gone or held for another task.
local v = redis.call('get', KEYS[1])
if not v then
  return 0
end
local head, flags, rest, task_id, tail = string.match(v, '^(%S+ %S+) (%S+) (%S+ %S+ %S+ %S+ %S+) ([^\t]*)(.*)$')
if task_id ~= ARGV[1] then
  return 0
end
-- 'r' joins the flags (record.py); a waiter's 'w' stays
if string.find(flags, 'w', 1, true) then
  flags = 'rw'
else
  flags = 'r'
end
redis.call('set', KEYS[1], head .. ' ' .. flags .. ' ' .. rest .. ' ' .. task_id .. tail, 'keepttl')
return 1
