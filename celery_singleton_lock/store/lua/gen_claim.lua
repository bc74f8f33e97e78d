-- GEN_CLAIM: a call's run of its key, claimed once, by the newest call (or by an overdue one when a
-- burst never goes quiet; see gen_verdict in _common.lua).
-- KEYS[1] - the key's generation hash (see gen_supersede.lua)
-- ARGV[1] - the call's generation (text)
-- ARGV[2] - the call's task id
-- ARGV[3] - how long the hash lasts at least when this claim writes it afresh (ms)
-- ARGV[4] - lock_debounce_max in ms (0: none)
-- Returns {verdict, newest task id ('' with 'run')}. On 'run' the claim is written and the burst ends (the next
-- call starts a new one); a generation newer than the one remembered (the hash was lost) becomes
-- the newest.
local gen = tonumber(ARGV[1])
local verdict, newest = gen_verdict(KEYS[1], gen, tonumber(ARGV[4]))
if verdict ~= 'run' then
  return {verdict, newest}
end
local last = tonumber(redis.call('hget', KEYS[1], 'gen') or '0') or 0
if gen >= last then
  redis.call('hset', KEYS[1], 'gen', ARGV[1], 'task', ARGV[2])
end
redis.call('hset', KEYS[1], 'claimed', ARGV[1])
redis.call('hdel', KEYS[1], 'first')
if redis.call('pttl', KEYS[1]) < 0 then
  redis.call('pexpire', KEYS[1], ARGV[3])
end
return {'run', newest}
