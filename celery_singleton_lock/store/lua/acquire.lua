-- ACQUIRE: take the lock if free.
-- KEYS[1] - the lock key
-- KEYS[2] - the task's fencing counter
-- ARGV[1] - token
-- ARGV[2] - ttl, ms
-- ARGV[3] - the holder's task id
-- ARGV[4] - the holder's host
-- ARGV[5] - the holder's pid
-- ARGV[6] - since, ms since the epoch
-- ARGV[7] - heartbeat period, ms
-- ARGV[8] - state: "running", or "queued" for an enqueue lock
-- ARGV[9] - fencing floor (optional; see next_fence in _common.lua)
-- Returns {1, fence} when taken (or already ours: asking again with the same token and state,
-- after a reply lost to a broken connection, is not a conflict with ourselves),
-- {0, task_id, host, pid, since, pttl, hb, state, token_matches} describing the holder
-- (holder_reply in _common.lua), or {3, ms} when the server started without its data less
-- than a lease ago and grants must wait that long still (restart_wait in _common.lua).
local h = redis.call('hmget', KEYS[1], 'token', 'task_id', 'host', 'pid', 'since', 'hb', 'state', 'fence')
if h[1] then
  if h[1] == ARGV[1] and h[7] == ARGV[8] then
    return {1, tonumber(h[8] or '0')}
  end
  return holder_reply(KEYS[1], h, h[1] == ARGV[1])
end
local wait = restart_wait(KEYS[2], ARGV[7])
if wait > 0 then
  return {3, wait}
end
local fence = next_fence(KEYS[2], ARGV[9])
redis.call('hset', KEYS[1], 'token', ARGV[1], 'fence', fence, 'task_id', ARGV[3], 'host', ARGV[4],
           'pid', ARGV[5], 'since', ARGV[6], 'ttl', ARGV[2], 'hb', ARGV[7], 'state', ARGV[8])
redis.call('pexpire', KEYS[1], ARGV[2])
return {1, fence}
