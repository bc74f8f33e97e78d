-- REQUEUE: a running holder that re-queued its own task (self.retry) and has finished turns
-- its lock back into an enqueue lock under the same token, for the retry's delivery to adopt,
-- and announces it when a waiter asked (await.lua: that delivery may be waiting already). The
-- waiters it had are told, so their ask goes: one still waiting asks again.
-- KEYS[1] - the lock key
-- ARGV[1] - token
-- ARGV[2] - ttl while queued, ms
-- Returns 1 when handed back to the queue, 0 when the token is gone.
local v = redis.call('get', KEYS[1])
if not v then
  return 0
end
local token, flag, hb, rest = string.match(v, '^(%S+) %S+ (%S+) (%S+) %S+(.*)$')
if token ~= ARGV[1] then
  return 0
end
local asked = string.find(flag, 'w', 1, true)
if asked then
  flag = string.gsub(flag, 'w', '')
  if flag == '' then
    flag = '-'
  end
end
redis.call('set', KEYS[1], token .. ' queued ' .. flag .. ' ' .. hb .. ' ' .. ARGV[2] .. rest, 'px', ARGV[2])
if asked then
  redis.call('publish', KEYS[1], 'released')
end
return 1
