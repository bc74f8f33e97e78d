-- MARK_REDELIVERED: a redelivered copy of the holder's own message met the lock; note it, so
-- the holder remembers at release that its task ran to the end (see release.lua).
-- KEYS[1] - the lock key
-- ARGV[1] - the holder's task id
-- Returns 1 when noted, 0 when the lock is gone or held for another task.
if redis.call('hget', KEYS[1], 'task_id') == ARGV[1] then
  redis.call('hset', KEYS[1], 'redelivered', 1)
  return 1
end
return 0
