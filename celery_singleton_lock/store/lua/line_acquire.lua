-- LINE_ACQUIRE: a waiter in the key's line asks for the lock: granted only when the lock is
-- free and no live waiter came before it, so waiters are served first come, first served
-- (_line.lua: the line). The ask renews the waiter's lease in line; a waiter whose lease
-- ended (it died) is dropped from the line here.
-- KEYS[1] - the lock key
-- KEYS[2] - the line key
-- ARGV[1] - token
-- ARGV[2] - the lock's value when granted (record.py), flags '-'
-- ARGV[3] - ttl (the lock's lease), ms
-- ARGV[4] - the waiter's lease in line, ms
-- Returns 1 when granted (the waiter leaves the line, the next in line is told it is now first,
-- and the lock's release is announced when others still wait), else {0, the lock's value ('' when free), its pttl (when free: the
-- soonest lease end of the waiters ahead), how many live waiters are ahead}.
local now = math.floor(now_us() / 1000)
local seq, mine, live = line_read(KEYS[2], now, ARGV[1])
if not mine then
  seq = seq + 1
  mine = seq
end
local ahead, first = line_ahead(live, mine)
local v = redis.pcall('get', KEYS[1])
if type(v) ~= 'string' and v ~= false then
  v = nil -- another Redis type at the lock's name: held, for its TTL
end
if v == false and ahead == 0 then
  local value = ARGV[2]
  if #live > 0 then -- others wait: the release is announced (the 'w' flag, see await.lua)
    value = string.gsub(value, '^(%S+ %S+) %S+', '%1 w', 1)
  end
  redis.call('set', KEYS[1], value, 'px', ARGV[3])
  line_write(KEYS[2], now, seq, live)
  line_tell(KEYS[2], live, 1) -- the next in line is now first: it listens for the release
  return 1
end
live[#live + 1] = {mine, ARGV[1], now + tonumber(ARGV[4])}
line_write(KEYS[2], now, seq, live)
if v == false then
  return {0, '', first - now, ahead}
end
if v then
  local head, flags, rest = string.match(v, '^(%S+ %S+) (%S+)(.*)$')
  if flags and not string.find(flags, 'w', 1, true) then
    redis.call('set', KEYS[1], head .. ' ' .. (flags == '-' and 'w' or flags .. 'w') .. rest, 'keepttl')
  end
end
return {0, v or '', redis.call('pttl', KEYS[1]), ahead}
