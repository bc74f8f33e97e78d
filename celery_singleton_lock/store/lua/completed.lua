-- COMPLETED: whether a release noted that a task ran to the end, and the note still lasts.
-- KEYS[1] - a bucket's set of completed task ids (scores: when each note runs out, server ms)
-- ARGV[1] - the task id
-- Returns 1 when noted and not run out by the server's clock, else 0.
local until_ms = redis.call('zscore', KEYS[1], ARGV[1])
if not until_ms then
  return 0
end
local now = redis.call('time')
if tonumber(until_ms) > tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) then
  return 1
end
return 0
