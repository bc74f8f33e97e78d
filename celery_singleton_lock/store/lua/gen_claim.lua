-- GEN_CLAIM: a call's run of its key, claimed once, by the newest call (see gen_verdict in
-- _common.lua).
-- KEYS[1] - the key's generation hash (see gen_supersede.lua)
-- ARGV[1] - the call's generation (text)
-- ARGV[2] - the call's task id
-- ARGV[3] - how long the hash lasts at least when a 'lost' call writes it afresh (ms)
-- ARGV[4] - how long a newer reservation keeps the newest call pending (ms; see gen_verdict)
-- Returns {verdict, newest task id, ms to wait} (see gen_verdict). On 'run' the claim is written and the burst
-- ends (the next call starts a new one). On 'lost' nothing is claimed: the call becomes the newest
-- of a new burst, to run if it is still the newest after a quiet period (the other messages of its
-- burst, published before the hash was lost, take its place meanwhile).
local gen = tonumber(ARGV[1])
local verdict, newest, wait_ms = gen_verdict(KEYS[1], gen, tonumber(ARGV[4]))
if verdict == 'lost' then
  redis.call('hset', KEYS[1], 'gen', ARGV[1], 'task', ARGV[2], 'first', string.format('%d', now_us() / 1000))
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('pexpire', KEYS[1], ARGV[3])
  end
  return {'lost', '', 0}
end
if verdict ~= 'run' then
  return {verdict, newest, wait_ms}
end
-- the claiming call is the newest from now on (its publisher may not have said so yet)
redis.call('hset', KEYS[1], 'gen', ARGV[1], 'task', ARGV[2], 'claimed', ARGV[1])
redis.call('hdel', KEYS[1], 'first')
return {'run', '', 0}
