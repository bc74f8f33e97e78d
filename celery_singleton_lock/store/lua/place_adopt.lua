-- PLACE_ADOPT: a worker takes over an enqueue place handed to it by token, as a running place
-- under its own token. The window still counts from the enqueue place's grant (the publish).
-- KEYS[1] - the enqueue places key
-- KEYS[2] - the running places key (the same as KEYS[1] for queued_or_running)
-- ARGV[1] - the enqueue token
-- ARGV[2] - the new token
-- ARGV[3] - limit (of running places, when the keys differ)
-- ARGV[4] - ttl, ms
-- ARGV[5] - the place's value after its clock fields (see place_acquire.lua)
-- Returns 1 when adopted (or already under the new token: a repeat after a lost reply), a
-- refusal (_places.lua) when no running place is free, or describing our own enqueue token's
-- running place (same = 1: a self.retry() not handed over yet), or 2 when the enqueue place is
-- not ours any more (expired, revoked, or adopted by another delivery of the same message).
local now = now_ms()
local have = redis.call('hget', KEYS[2], ARGV[2])
if have and holds(have, now) then
  return 1
end
local queued = redis.call('hget', KEYS[1], ARGV[1])
if not queued or not holds(queued, now) then
  return 2
end
local state, flags, _, keep = place_parts(queued)
if state ~= 'queued' then
  if KEYS[1] == KEYS[2] then
    local _, count = survey(KEYS[2], now, ARGV[1])
    return refused(queued, place_end(queued), now, count, nil, 1, ARGV[1])
  end
  return 2
end
if KEYS[1] ~= KEYS[2] then
  local _, count, soon_v, soon_e, soon_f, window = survey(KEYS[2], now, ARGV[2])
  if count >= tonumber(ARGV[3]) then
    return refused(soon_v, soon_e, now, count, window, 0, soon_f)
  end
end
redis.call('hdel', KEYS[1], ARGV[1])
if KEYS[1] ~= KEYS[2] then
  announce(KEYS[1])
  refit(KEYS[1], now)
end
local lease = now + tonumber(ARGV[4])
redis.call('hset', KEYS[2], ARGV[2], 'running ' .. flags .. ' ' .. ms(lease) .. ' ' .. ms(keep) .. ' ' .. ARGV[5],
           '~n', ARGV[3])
keep_alive(KEYS[2], math.max(lease, keep) - now)
return 1
