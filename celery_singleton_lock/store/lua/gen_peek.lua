-- GEN_PEEK: what GEN_CLAIM would answer now, without claiming.
-- KEYS[1] - the key's generation hash (see gen_supersede.lua)
-- ARGV[1] - the call's generation (text)
-- ARGV[2] - how long a newer reservation keeps the newest call pending (ms; see gen_verdict)
-- Returns {verdict, newest task id, ms to wait}: verdict 'run', 'superseded', 'ran', 'lost' or 'pending'
-- (see gen_verdict).
local verdict, newest, wait_ms = gen_verdict(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
return {verdict, newest, wait_ms}
