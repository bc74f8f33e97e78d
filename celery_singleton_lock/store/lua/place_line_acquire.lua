-- PLACE_LINE_ACQUIRE: a waiter in the line of a key with places asks for one (_line.lua: the
-- line): granted only when, after the live waiters that came before it and the turns handed
-- out (place_acquire.lua), a place is free.
-- KEYS[1] - the places key
-- KEYS[2] - the line key
-- ARGV[1] - token
-- ARGV[2] - state: 'running'
-- ARGV[3] - limit (places at once)
-- ARGV[4] - ttl (the lease), ms
-- ARGV[5] - window, ms
-- ARGV[6] - the place's value after its clock fields (as place_acquire.lua's ARGV[6])
-- ARGV[7] - the waiter's lease in the line, ms
-- Returns 1 when taken (the waiter leaves the line; the one now among the first ARGV[3] in line
-- is told), else a refusal as place_acquire.lua's,
-- {0, value, pttl, held, window, same, token}, then how many live waiters are ahead.
local now = now_ms()
local seq, mine, live = line_read(KEYS[2], now, ARGV[1])
if not mine then
  seq = seq + 1
  mine = seq
end
local ahead, first_lease = line_ahead(live, mine)
local held, count, soon_v, soon_e, soon_f, window, last, _, _, _, turns = survey(KEYS[1], now, ARGV[1], '')
if held and string.sub(held, 1, #ARGV[2] + 1) == ARGV[2] .. ' ' then
  line_write(KEYS[2], now, seq, live)
  return 1
end
local limit = tonumber(ARGV[3])
local w = tonumber(ARGV[5])
local opens = opens_at(now, w)
if not held and not opens and count + #turns + ahead < limit then
  local lease = now + tonumber(ARGV[4])
  local keep = now
  if w > 0 then
    keep = now + w + 1
  end
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2] .. ' - ' .. ms(lease) .. ' ' .. ms(keep) .. ' ' .. ARGV[6],
             '~n', ARGV[3])
  if #live > 0 then -- others wait: the next release is announced
    redis.call('hset', KEYS[1], '~w', '1')
  end
  keep_alive(KEYS[1], math.max(last, lease, keep) - now)
  line_write(KEYS[2], now, seq, live)
  line_tell(KEYS[2], live, limit) -- the waiter now among the first `limit` in line listens for releases
  return 1
end
live[#live + 1] = {mine, ARGV[1], now + tonumber(ARGV[7])}
line_write(KEYS[2], now, seq, live)
local reply
if held then
  reply = refused(held, place_end(held), now, count, nil, 1, ARGV[1])
elseif opens then
  reply = refused('restarted - ' .. ms(opens) .. ' ' .. ms(opens) .. ' 0 0 0 0 - ', opens, now, count, opens, 0,
                  '~restarted')
elseif soon_v then
  redis.call('hset', KEYS[1], '~w', '1')
  keep_alive(KEYS[1], 1)
  reply = refused(soon_v, soon_e, now, count, window, 0, soon_f)
else -- a place is free, and a waiter before this one is to take it: describe that waiter's lease
  local e = first_lease or now
  reply = refused('line - ' .. ms(e) .. ' ' .. ms(e) .. ' 0 0 0 0 - ', e, now, count, nil, 0, '~line')
end
reply[8] = ahead
return reply
