-- GEN_PEEK: what GEN_CLAIM would answer now, without claiming.
-- KEYS[1] - the key's generation hash (see gen_supersede.lua)
-- ARGV[1] - the call's generation (text)
-- Returns {verdict, newest task id}: verdict 'run', 'superseded', 'ran' or 'lost' (see gen_verdict).
local verdict, newest = gen_verdict(KEYS[1], tonumber(ARGV[1]))
return {verdict, newest}
