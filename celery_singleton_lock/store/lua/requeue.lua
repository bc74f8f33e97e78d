-- REQUEUE: a running holder that re-queued its own task (self.retry) and has finished turns
-- its lock back into an enqueue lock under the same token, for the retry's delivery to adopt,
-- and announces it (that delivery may be waiting already).
-- KEYS[1] - the lock key
-- ARGV[1] - token
-- ARGV[2] - ttl while queued, ms
-- Returns 1 when handed back to the queue, 0 when the token is gone.
if redis.call('hget', KEYS[1], 'token') == ARGV[1] then
  redis.call('hset', KEYS[1], 'state', 'queued', 'ttl', ARGV[2])
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('publish', KEYS[1], 'released')
  return 1
end
return 0
