-- PLACE_END_WINDOW: an operator ends a key's window (`celery locks clear --force`): every place
-- that only its window keeps (released) is dropped, and every turn handed out (a call that comes
-- back for it then asks as any call does), so the next calls may start at once. Places
-- still held keep their leases (their holders are cleared by token first, one by one), and
-- the waiters that asked hear of it as of a release.
-- KEYS[1] - the places key
-- Returns how many places were dropped (turns are not counted).
local now = now_ms()
local all = redis.call('hgetall', KEYS[1])
local dropped = 0
for i = 1, #all, 2 do
  local field, v = all[i], all[i + 1]
  if string.sub(field, 1, 2) == '~t' then
    redis.call('hdel', KEYS[1], field)
  elseif string.byte(field, 1) ~= 126 and place_parts(v) == 'released' then
    redis.call('hdel', KEYS[1], field)
    dropped = dropped + 1
  end
end
announce(KEYS[1])
refit(KEYS[1], now)
return dropped
