-- GEN_CLAIM: a call's run of its key, claimed once, and only by the newest call.
-- KEYS[1] - the key's generation hash (see gen_supersede.lua)
-- ARGV[1] - the call's generation (text)
-- ARGV[2] - the call's task id
-- ARGV[3] - how long the hash lasts at least when this claim has to write it afresh (ms)
-- Returns {'run', ''} when the call is the newest and nobody claimed it (the claim is written and
-- the burst ends: later calls start a new one), {'superseded', task id} when a newer call was
-- made, {'ran', task id} when this generation was claimed already (another delivery of the message).
-- A generation newer than the one remembered (the hash was lost) is the newest there is.
local h = redis.call('hmget', KEYS[1], 'gen', 'task', 'claimed')
local gen = tonumber(ARGV[1])
local last = tonumber(h[1] or '0') or 0
if gen < last then
  return {'superseded', h[2] or ''}
end
if gen == last and (tonumber(h[3] or '0') or 0) >= gen then
  return {'ran', h[2] or ''}
end
redis.call('hset', KEYS[1], 'gen', ARGV[1], 'task', ARGV[2], 'claimed', ARGV[1])
redis.call('hdel', KEYS[1], 'first')
if redis.call('pttl', KEYS[1]) < 0 then
  redis.call('pexpire', KEYS[1], ARGV[3])
end
return {'run', ''}
