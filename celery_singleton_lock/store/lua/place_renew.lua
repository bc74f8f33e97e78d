-- PLACE_RENEW: move the lease end of every running place we still hold, in one call. A place
-- missing from a server that started less than restart_window ago (_common.lua) is taken back
-- under the same token, as renew.lua takes back a lock (see start_gate.py).
-- KEYS[i]      - a places key, i = 1 .. n (n = #KEYS)
-- ARGV[i]      - its token
-- ARGV[n + i]  - its ttl, ms
-- ARGV[2n + i] - its heartbeat period, ms
-- ARGV[3n + i] - its holder's part of the value (record.py's tail), written again on a take-back
-- Returns a list with 1 where extended (or taken back), 0 where the place is not ours any more.
local n = #KEYS
local out = {}
local up = nil
local now = now_ms()
for i = 1, n do
  local v = redis.call('hget', KEYS[i], ARGV[i])
  local lease = now + tonumber(ARGV[n + i])
  out[i] = 0
  if v then
    local state, flags, until_, keep, rest = place_parts(v)
    if state == 'running' and until_ > now then
      redis.call('hset', KEYS[i], ARGV[i], 'running ' .. flags .. ' ' .. ms(lease) .. ' ' .. ms(keep) .. rest)
      keep_alive(KEYS[i], lease - now)
      out[i] = 1
    end
  else
    up = up or uptime_ms()
    if up < restart_window(ARGV[2 * n + i]) then
      local value = 'running - ' .. ms(lease) .. ' 0 ' .. ARGV[2 * n + i] .. ' ' .. ARGV[n + i]
      if (ARGV[3 * n + i] or '') ~= '' then
        value = value .. ' ' .. ARGV[3 * n + i]
      end
      redis.call('hset', KEYS[i], ARGV[i], value)
      keep_alive(KEYS[i], lease - now)
      out[i] = 1
    end
  end
end
return out
