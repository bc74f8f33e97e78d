-- RENEW: extend every running lock we still hold, in one call (a lock handed back to the
-- queue is not ours to extend). A lock that is gone from a server that started less than
-- restart_window ago (_common.lua) is taken back under the same token: the server may have
-- lost it in a restart without its data, and no grant can have come since (grants wait that
-- long after a start: see start_gate.py), so its holder keeps it and nobody else may start.
-- KEYS[i]      - a lock key, i = 1 .. n (n = #KEYS)
-- ARGV[i]      - its token
-- ARGV[n + i]  - its ttl, ms
-- ARGV[2n + i] - its heartbeat period, ms
-- ARGV[3n + i] - its holder's part of the value (record.py's tail: since, pid, host, task id),
--                written again when the lock is taken back ('' writes the first five fields only)
-- Returns a list with 1 where extended (or taken back), 0 where the token is gone.
local n = #KEYS
local out = {}
local up = nil
for i = 1, n do
  -- pcall: a key of another type put at a lock's name (store/foreign.py) is not ours, and must
  -- not keep the locks renewed beside it in this call from being renewed
  local v = redis.pcall('get', KEYS[i])
  out[i] = 0
  if type(v) == 'table' then
    -- another type: not ours, and not to be taken back
  elseif v then
    local token, state = string.match(v, '^(%S+) (%S+)')
    if token == ARGV[i] and state == 'running' then
      redis.call('pexpire', KEYS[i], ARGV[n + i])
      out[i] = 1
    end
  else
    up = up or uptime_ms()
    if up < restart_window(ARGV[2 * n + i]) then
      local value = ARGV[i] .. ' running - ' .. ARGV[2 * n + i] .. ' ' .. ARGV[n + i]
      if (ARGV[3 * n + i] or '') ~= '' then
        value = value .. ' ' .. ARGV[3 * n + i]
      end
      redis.call('set', KEYS[i], value, 'px', ARGV[n + i])
      out[i] = 1
    end
  end
end
return out
