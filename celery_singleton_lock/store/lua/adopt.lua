-- ADOPT: a worker takes over an enqueue lock handed to it by token, as a running lock.
-- KEYS[1] - the enqueue lock key
-- KEYS[2] - the running lock key (the same as KEYS[1] for queued_or_running)
-- KEYS[3] - the task's fencing counter
-- ARGV[1] - the enqueue token
-- ARGV[2] - the new token
-- ARGV[3] - ttl, ms
-- ARGV[4] - the holder's task id
-- ARGV[5] - the holder's host
-- ARGV[6] - the holder's pid
-- ARGV[7] - since, ms since the epoch
-- ARGV[8] - heartbeat period, ms
-- ARGV[9] - fencing floor (optional; see next_fence in _common.lua)
-- Returns {1, fence} when adopted (or already adopted under the new token: a repeat after a
-- lost reply), {0, task_id, host, pid, since, pttl, hb, state, token_matches} as acquire.lua
-- when the running lock is held by someone else (token_matches 1 when that holder still runs
-- under the enqueue token: a self.retry() not handed over yet), or {2} when the enqueue lock
-- is not ours any more (expired, revoked, or adopted by another delivery of the same message),
-- or {3, ms} as acquire.lua when grants must still wait after a restart without data.
local mine = redis.call('hmget', KEYS[2], 'token', 'fence')
if mine[1] == ARGV[2] then
  return {1, tonumber(mine[2] or '0')}
end
local queued = redis.call('hmget', KEYS[1], 'token', 'state')
if queued[1] ~= ARGV[1] or queued[2] ~= 'queued' then
  if KEYS[1] == KEYS[2] then
    local h = redis.call('hmget', KEYS[2], 'token', 'task_id', 'host', 'pid', 'since', 'hb', 'state')
    if h[1] then
      return holder_reply(KEYS[2], h, h[1] == ARGV[1])
    end
  end
  return {2}
end
if KEYS[1] ~= KEYS[2] then
  local h = redis.call('hmget', KEYS[2], 'token', 'task_id', 'host', 'pid', 'since', 'hb', 'state')
  if h[1] then
    return holder_reply(KEYS[2], h, false)
  end
end
local wait = restart_wait(KEYS[3], ARGV[8])
if wait > 0 then
  return {3, wait}
end
if KEYS[1] ~= KEYS[2] then
  redis.call('del', KEYS[1])
end
local fence = next_fence(KEYS[3], ARGV[9])
redis.call('del', KEYS[2])
redis.call('hset', KEYS[2], 'token', ARGV[2], 'fence', fence, 'task_id', ARGV[4], 'host', ARGV[5],
           'pid', ARGV[6], 'since', ARGV[7], 'ttl', ARGV[3], 'hb', ARGV[8], 'state', 'running')
redis.call('pexpire', KEYS[2], ARGV[3])
return {1, fence}
