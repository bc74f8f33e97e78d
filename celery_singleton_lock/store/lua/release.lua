-- RELEASE: delete the lock only if we still hold it in the state we let go of, announce the
-- release when a waiter asked for it (await.lua), and (optionally) note that the holder's task
-- ran to the end, for later redeliveries of its message to find. The state matters where one
-- token names two things: a self.retry() message carries its running predecessor's token as
-- its enqueue token, so giving up that enqueue lock ('queued') must not delete the running lock.
-- KEYS[1] - the lock key
-- KEYS[2] - the set of completed task ids of the key's bucket (optional)
-- ARGV[1] - the head of our lock's value with no flags (record.py): '<token> <state> -', the
--           state being 'running' (an execution's lock) or 'queued' (an enqueue lock)
-- ARGV[2] - the holder's task id
-- ARGV[3] - how long to remember it, ms
-- ARGV[4] - "1" to note it even if no redelivered copy met the lock
-- Returns 1 when deleted, 0 when the lock was gone, held by another token or in another state.
local v = redis.call('get', KEYS[1])
if not v then
  return 0
end
local flags = '-'
-- The common case is told by the head alone: ours, in that state, nobody asked, no redelivery met it.
if string.find(v, ARGV[1], 1, true) ~= 1 then
  local token, state = string.match(ARGV[1], '^(%S+) (%S+)')
  local n = #token
  -- the value starts with the token and a space (record.py); 32 is the space's byte
  if string.sub(v, 1, n) ~= token or string.byte(v, n + 1) ~= 32 then
    return 0
  end
  -- after the token come the state and the flags: 'w' a waiter asked, 'r' a redelivery met it
  local held
  held, flags = string.match(v, '^(%S+) (%S+)', n + 2)
  if held ~= state then
    return 0
  end
  flags = flags or '-'
end
redis.call('del', KEYS[1])
if flags ~= '-' and string.find(flags, 'w', 1, true) then
  redis.call('publish', KEYS[1], 'released')
end
if KEYS[2] and (ARGV[4] == '1' or string.find(flags, 'r', 1, true)) then
  local now = redis.call('time')
  local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  redis.call('zremrangebyscore', KEYS[2], '-inf', ms)
  redis.call('zadd', KEYS[2], ms + tonumber(ARGV[3]), ARGV[2])
  redis.call('pexpire', KEYS[2], ARGV[3])
end
return 1
