-- PLACE_READ: a key's places as they stand, with the server's clock to judge them by (for
-- diagnostics: holder(), celery locks). Reads only; drops nothing.
-- KEYS[1] - the places key
-- Returns {now_ms, field1, value1, field2, value2, ...} (HGETALL's fields after the clock).
local out = redis.call('hgetall', KEYS[1])
table.insert(out, 1, ms(now_ms()))
return out
