-- GEN_PEEK: what GEN_CLAIM would answer now, without claiming.
-- KEYS[1] - the key's generation hash (see gen_supersede.lua)
-- ARGV[1] - the call's generation (text)
-- ARGV[2] - how long a newer reservation keeps the newest call pending (ms; see gen_verdict)
-- Returns {verdict, newest task id, ms to wait, recorded}: verdict 'run', 'superseded', 'ran', 'lost' or
-- 'pending' (see gen_verdict); recorded 1 when the call is the newest on record (its publisher said so,
-- or a worker did), 0 when a call that may run is newer than that (GEN_SUPERSEDE makes it so).
local gen = tonumber(ARGV[1])
local verdict, newest, wait_ms = gen_verdict(KEYS[1], gen, tonumber(ARGV[2]))
local recorded = 1
if verdict == 'run' and (tonumber(redis.call('hget', KEYS[1], 'gen') or '0') or 0) ~= gen then
  recorded = 0
end
return {verdict, newest, wait_ms, recorded}
