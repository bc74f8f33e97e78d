-- ADOPT: a worker takes over an enqueue lock handed to it by token, as a running lock.
-- KEYS[1] - the enqueue lock key
-- KEYS[2] - the running lock key (the same as KEYS[1] for queued_or_running)
-- ARGV[1] - the enqueue token
-- ARGV[2] - the new token
-- ARGV[3] - the running lock's value (record.py), which starts with the new token
-- ARGV[4] - ttl, ms
-- Returns {1} when adopted (or already adopted under the new token: a repeat after a lost
-- reply), {0, value, pttl} describing the running lock's holder when someone else holds it
-- (its token is the enqueue token when it is a self.retry() not handed over yet), or {2}
-- when the enqueue lock is not ours any more (expired, revoked, or adopted by another
-- delivery of the same message).
local mine = redis.call('get', KEYS[2])
if mine and string.match(mine, '^(%S+)') == ARGV[2] then
  return {1}
end
local queued = redis.call('get', KEYS[1])
local token, state
if queued then
  token, state = string.match(queued, '^(%S+) (%S+)')
end
if token ~= ARGV[1] or state ~= 'queued' then
  if KEYS[1] == KEYS[2] and mine then
    return {0, mine, redis.call('pttl', KEYS[2])}
  end
  return {2}
end
if KEYS[1] ~= KEYS[2] then
  if mine then
    return {0, mine, redis.call('pttl', KEYS[2])}
  end
  redis.call('del', KEYS[1])
end
redis.call('set', KEYS[2], ARGV[3], 'px', ARGV[4])
return {1}
