-- RELEASE: delete the lock only if we still hold it, announce the release, and (optionally)
-- note that the holder's task ran to the end, for later redeliveries of its message to find.
-- KEYS[1] - the lock key
-- KEYS[2] - the set of completed task ids of the key's bucket (optional)
-- ARGV[1] - token
-- ARGV[2] - the holder's task id
-- ARGV[3] - how long to remember it, ms
-- ARGV[4] - "1" to note it even if no redelivered copy met the lock
-- Returns 1 when deleted, 0 when the lock was gone or held by another token.
local v = redis.call('get', KEYS[1])
local n = #ARGV[1]
-- the value starts with the token and a space (record.py); 32 is the space's byte
if not v or string.sub(v, 1, n) ~= ARGV[1] or string.byte(v, n + 1) ~= 32 then
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[1], 'released')
if KEYS[2] and (ARGV[4] == '1' or string.match(v, '^%S+ %S+ (%S+)') == 'r') then
  local now = redis.call('time')
  local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  redis.call('zremrangebyscore', KEYS[2], '-inf', ms)
  redis.call('zadd', KEYS[2], ms + tonumber(ARGV[3]), ARGV[2])
  redis.call('pexpire', KEYS[2], ARGV[3])
end
return 1
