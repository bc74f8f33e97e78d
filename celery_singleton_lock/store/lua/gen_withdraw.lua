-- GEN_WITHDRAW: a call whose message was not published gives the key back to the call it displaced.
-- KEYS[1] - the key's generation hash (see gen_supersede.lua)
-- ARGV[1] - the withdrawn call's generation (text)
-- ARGV[2] - the hash's gen before that call (text; '' when absent)
-- ARGV[3] - the hash's task before that call ('' when absent)
-- ARGV[4] - the hash's first before that call ('' when absent)
-- Only while the hash still names the withdrawn call: a newer call (or a call that met a store that
-- forgot the key) owns the key since, and stays its newest. The claimed field is left as it is; top
-- keeps the withdrawn generation from being handed out again (its message may have gone out after all).
-- Returns 1 when the hash was given back, 0 when it names another call now.
if redis.call('hget', KEYS[1], 'gen') ~= ARGV[1] then
  return 0
end
redis.call('hset', KEYS[1], 'top', ARGV[1])
local fields = {'gen', 'task', 'first'}
for i = 1, 3 do
  local value = ARGV[i + 1]
  if value == '' then
    redis.call('hdel', KEYS[1], fields[i])
  else
    redis.call('hset', KEYS[1], fields[i], value)
  end
end
return 1
