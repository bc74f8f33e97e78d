-- CLEAR_FOREIGN: an operator removes a key at a lock's name that is no lock (store/foreign.py),
-- only while it is still what was read: a value of another Redis type, or a string that is no
-- lock value. A lock taken there since (a string in a lock's state, record.py) is left alone.
-- Waiters are told (they may have waited on it, see await.lua), as for a release.
-- KEYS[1] - the key
-- ARGV[1] - what was read: 'other-type' (another Redis type) or 'string' (a string that is no lock)
-- Returns 1 when deleted, 0 when the key is gone or is no longer what was read.
local v = redis.pcall('get', KEYS[1])
if not v then
  return 0
end
if type(v) == 'table' then
  -- an error reply: WRONGTYPE, a value of another type
  if ARGV[1] ~= 'other-type' then
    return 0
  end
else
  local state = string.match(v, '^%S+ (%S+)')
  if ARGV[1] ~= 'string' or state == 'running' or state == 'queued' then
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[1], 'released')
return 1
