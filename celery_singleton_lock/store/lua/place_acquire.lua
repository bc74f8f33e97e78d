-- PLACE_ACQUIRE: take one of a key's places if fewer than the limit are taken, after
-- dropping those that ended; calls that hold a turn (see places.py) come first.
-- KEYS[1] - the places key
-- ARGV[1] - token
-- ARGV[2] - state: 'running', or 'queued' for an enqueue place
-- ARGV[3] - limit (places at once)
-- ARGV[4] - ttl (the lease), ms
-- ARGV[5] - window, ms
-- ARGV[6] - the place's value after its clock fields: '<hb> <ttl> <since> <pid> <host> <task_id>[\t<description>]'
-- ARGV[7] - the task id (a second delivery of one message takes no second place; a turn is the task id's);
--           '' for a hold of a shared lock, which may take several places under one task id and gets no turn
-- ARGV[8] - '1' when a call refused by full windows is handed a turn (it will come back for it)
-- Returns 1 when taken (or already ours under the token in that state: a repeated ask), or a
-- refusal {0, value, pttl, held, window, same, token[, turn]} (_places.lua) for the place that
-- frees soonest, for our own place when the token holds one in another state (same = 1), or for
-- the place another execution of the same task id holds (a redelivery, a self.retry()); turn is
-- the ms until the call's turn (<= 0: it has come), when it holds one. A server younger than the
-- window grants no place of the key (opens_at in _places.lua): its refusal describes a place in
-- state 'restarted' that frees when a window has passed since the server's start.
local now = now_ms()
local mine, count, soon_v, soon_e, soon_f, window, last, twin_f, twin_v, keeps, turns, my_turn =
  survey(KEYS[1], now, ARGV[1], ARGV[7])
if mine then
  if string.sub(mine, 1, #ARGV[2] + 1) == ARGV[2] .. ' ' then
    return 1
  end
  return refused(mine, place_end(mine), now, count, nil, 1, ARGV[1])
end
if twin_f then
  return refused(twin_v, place_end(twin_v), now, count, nil, 0, twin_f)
end
local limit = tonumber(ARGV[3])
local w = tonumber(ARGV[5])
-- A call whose turn has come competes for the free places alone; any other call queues
-- behind every turn handed out.
local ahead = #turns
if my_turn and my_turn <= now then
  ahead = 0
end
local opens = opens_at(now, w)
if opens or count + ahead >= limit then
  local turn = my_turn
  if not turn and ARGV[8] == '1' and ARGV[7] ~= '' and w > 0 and (window or count == 0 or opens) then
    turn = math.max(next_turn(now, limit, w, keeps, turns), opens or 0)
    local lapses = turn + math.max(w, TURN_GRACE_MS)
    redis.call('hset', KEYS[1], '~t' .. ARGV[7], ms(turn) .. ' ' .. ms(lapses))
    keep_alive(KEYS[1], lapses - now)
  end
  local reply
  if opens then -- the server is younger than the window: describe when it opens
    reply = refused('restarted - ' .. ms(opens) .. ' ' .. ms(opens) .. ' 0 0 0 0 - ', opens, now, count, opens, 0,
                    '~restarted')
  elseif soon_v then
    reply = refused(soon_v, soon_e, now, count, window, 0, soon_f)
  else -- the places are free, but turns handed out come first: describe the first of them
    local first = turns[1]
    for _, t in ipairs(turns) do
      if t[1] < first[1] then
        first = t
      end
    end
    reply = refused('turn - ' .. ms(first[1]) .. ' ' .. ms(first[1]) .. ' 0 0 0 0 - ' .. first[2],
                    math.max(first[1], now), now, count, nil, 0, '~t' .. first[2])
  end
  if turn then
    reply[8] = turn - now
  end
  return reply
end
local lease = now + tonumber(ARGV[4])
-- The clock is in whole ms: the call may start up to 1 ms after now, so a window counts from
-- the next ms, and no later start falls within w ms of this one.
local keep = now
if w > 0 then
  keep = now + w + 1
end
if my_turn then
  redis.call('hdel', KEYS[1], '~t' .. ARGV[7])
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2] .. ' - ' .. ms(lease) .. ' ' .. ms(keep) .. ' ' .. ARGV[6],
           '~n', ARGV[3])
keep_alive(KEYS[1], math.max(last, lease, keep) - now)
return 1
