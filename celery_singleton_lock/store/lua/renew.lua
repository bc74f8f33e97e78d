-- RENEW: extend every running lock we still hold, in one call (a lock handed back to the
-- queue is not ours to extend). A lock that is gone from a server that started less than
-- restart_window ago (_common.lua) is taken back under the same token: the server may have
-- lost it in a restart without its data, and no grant of it can have come since
-- (restart_wait), so its holder keeps it and nobody else may start.
-- KEYS[i]      - a lock key, i = 1 .. n (n = #KEYS)
-- ARGV[i]      - its token
-- ARGV[n + i]  - its ttl, ms
-- ARGV[2n + i] - its heartbeat period, ms
-- Returns a list with 1 where extended (or taken back), 0 where the token is gone.
local n = #KEYS
local out = {}
local up = nil
for i = 1, n do
  local h = redis.call('hmget', KEYS[i], 'token', 'state')
  out[i] = 0
  if h[1] == ARGV[i] and h[2] == 'running' then
    redis.call('pexpire', KEYS[i], ARGV[n + i])
    out[i] = 1
  elseif not h[1] then
    up = up or uptime_ms()
    if up < restart_window(ARGV[2 * n + i]) then
      redis.call('hset', KEYS[i], 'token', ARGV[i], 'state', 'running', 'ttl', ARGV[n + i],
                 'hb', ARGV[2 * n + i])
      redis.call('pexpire', KEYS[i], ARGV[n + i])
      out[i] = 1
    end
  end
end
return out
