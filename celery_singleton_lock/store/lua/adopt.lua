-- ADOPT: a worker takes over an enqueue lock handed to it by token, as a running lock.
-- KEYS[1] - the enqueue lock key
-- KEYS[2] - the running lock key (the same as KEYS[1] for queued_or_running)
-- ARGV[1] - the head of the enqueue lock's value with no flags (record.py): '<enqueue token> queued -'
-- ARGV[2] - the new token
-- ARGV[3] - the running lock's value (record.py), which starts with the new token; it keeps
--           a waiter's ask from the enqueue lock
-- ARGV[4] - ttl, ms
-- Returns 1 when adopted (or already adopted under the new token: a repeat after a lost
-- reply), {0, value, pttl} describing the running lock's holder when someone else holds it
-- (its token is the enqueue token when it is a self.retry() not handed over yet), or 2
-- when the enqueue lock is not ours any more (expired, revoked, or adopted by another
-- delivery of the same message).

local mine = redis.call('get', KEYS[2])
-- The common case is told by the head alone: queued_or_running's own enqueue lock, no flags.
if mine and string.find(mine, ARGV[1], 1, true) == 1 and KEYS[1] == KEYS[2] then
  redis.call('set', KEYS[2], ARGV[3], 'px', ARGV[4])
  return 1
end
local n = #ARGV[2]
-- a value starts with its token and a space (record.py); 32 is the space's byte
if mine and string.sub(mine, 1, n) == ARGV[2] and string.byte(mine, n + 1) == 32 then
  return 1
end
local queued = mine
if KEYS[1] ~= KEYS[2] then
  queued = redis.call('get', KEYS[1])
end
local head = string.match(ARGV[1], '^%S+') .. ' queued '
if not queued or string.sub(queued, 1, #head) ~= head then
  if KEYS[1] == KEYS[2] and mine then
    return {0, mine, redis.call('pttl', KEYS[2])}
  end
  return 2
end
if KEYS[1] ~= KEYS[2] then
  if mine then
    return {0, mine, redis.call('pttl', KEYS[2])}
  end
  redis.call('del', KEYS[1])
end
local value = ARGV[3]
-- the flags follow the enqueue lock's head (record.py): a waiter's ask ('w', await.lua) carries over
local flags = string.match(queued, '^%S+', #head + 1)
if flags and string.find(flags, 'w', 1, true) then
  value = string.gsub(value, ' running %- ', ' running w ', 1)
end
redis.call('set', KEYS[2], value, 'px', ARGV[4])
return 1
