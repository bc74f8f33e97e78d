-- RENEW: extend every running lock we still hold, in one call (a lock handed back to the
-- queue is not ours to extend).
-- KEYS[i]     - a lock key, i = 1 .. n (n = #KEYS)
-- ARGV[i]     - its token
-- ARGV[n + i] - its ttl, ms
-- Returns a list with 1 where extended, 0 where the token is gone.
local n = #KEYS
local out = {}
for i = 1, n do
  local h = redis.call('hmget', KEYS[i], 'token', 'state')
  if h[1] == ARGV[i] and h[2] == 'running' then
    redis.call('pexpire', KEYS[i], ARGV[n + i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
