-- PLACE_MARK_REDELIVERED: note on the place of a task's execution that a redelivered copy of
-- its message met it (see mark_redelivered.lua).
-- KEYS[1] - the places key
-- ARGV[1] - the holder's task id
-- Returns 1 when noted, 0 when no live place is that task's.
local now = now_ms()
local all = redis.call('hgetall', KEYS[1])
for i = 1, #all, 2 do
  local field, v = all[i], all[i + 1]
  if string.byte(field, 1) ~= 126 and holds(v, now) then
    local state, flags, lease, keep, rest = place_parts(v)
    if string.match(rest, '^ %S+ %S+ %S+ %S+ %S+ ([^\t]*)') == ARGV[1] then
      if not string.find(flags, 'r', 1, true) then
        if flags == '-' then flags = 'r' else flags = flags .. 'r' end
        redis.call('hset', KEYS[1], field, state .. ' ' .. flags .. ' ' .. ms(lease) .. ' ' .. ms(keep) .. rest)
      end
      return 1
    end
  end
end
return 0
