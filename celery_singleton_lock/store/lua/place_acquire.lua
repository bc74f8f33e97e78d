-- PLACE_ACQUIRE: take one of a key's places if fewer than the limit are taken, after
-- dropping those that ended.
-- KEYS[1] - the places key
-- ARGV[1] - token
-- ARGV[2] - state: 'running', or 'queued' for an enqueue place
-- ARGV[3] - limit (places at once)
-- ARGV[4] - ttl (the lease), ms
-- ARGV[5] - window, ms
-- ARGV[6] - the place's value after its clock fields: '<hb> <ttl> <since> <pid> <host> <task_id>[\t<description>]'
-- ARGV[7] - the task id (a second delivery of one message takes no second place)
-- Returns 1 when taken (or already ours under the token in that state: a repeated ask), or a
-- refusal {0, value, pttl, held, window, same, token} (_places.lua) for the place that frees
-- soonest, for our own place when the token holds one in another state (same = 1), or for
-- the place another execution of the same task id holds (a redelivery, a self.retry()).
local now = now_ms()
local mine, count, soon_v, soon_e, soon_f, window, last, twin_f, twin_v = survey(KEYS[1], now, ARGV[1], ARGV[7])
if mine then
  if string.sub(mine, 1, #ARGV[2] + 1) == ARGV[2] .. ' ' then
    return 1
  end
  return refused(mine, place_end(mine), now, count, nil, 1, ARGV[1])
end
if twin_f then
  return refused(twin_v, place_end(twin_v), now, count, nil, 0, twin_f)
end
if count >= tonumber(ARGV[3]) then
  return refused(soon_v, soon_e, now, count, window, 0, soon_f)
end
local lease = now + tonumber(ARGV[4])
local keep = now + tonumber(ARGV[5])
redis.call('hset', KEYS[1], ARGV[1], ARGV[2] .. ' - ' .. ms(lease) .. ' ' .. ms(keep) .. ' ' .. ARGV[6],
           '~n', ARGV[3])
keep_alive(KEYS[1], math.max(last, lease, keep) - now)
return 1
