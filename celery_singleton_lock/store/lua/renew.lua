-- RENEW: extend every running lock we still hold, in one call (a lock handed back to the
-- queue is not ours to extend). A lock the server lost by starting without its data, less
-- than its lease ago, is taken back under the same token: no grant of it could have come
-- since (restart_wait in _common.lua), so its holder keeps it and nobody else may start.
-- KEYS[i]     - a lock key, i = 1 .. n (n = #KEYS)
-- ARGV[i]     - its token
-- ARGV[n + i] - its ttl, ms
-- Returns a list with 1 where extended (or taken back), 0 where the token is gone.
local n = #KEYS
local out = {}
local up = nil
for i = 1, n do
  local h = redis.call('hmget', KEYS[i], 'token', 'state')
  if h[1] == ARGV[i] and h[2] == 'running' then
    redis.call('pexpire', KEYS[i], ARGV[n + i])
    out[i] = 1
  elseif not h[1] then
    if up == nil then
      up = tonumber(string.match(redis.call('info', 'server'), 'uptime_in_seconds:(%d+)') or '0')
    end
    if up * 1000 < tonumber(ARGV[n + i]) then
      redis.call('hset', KEYS[i], 'token', ARGV[i], 'state', 'running', 'ttl', ARGV[n + i])
      redis.call('pexpire', KEYS[i], ARGV[n + i])
      out[i] = 1
    else
      out[i] = 0
    end
  else
    out[i] = 0
  end
end
return out
