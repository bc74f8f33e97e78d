-- Helpers shared by the line scripts (see line.py). The line of a key is one string beside it,
-- '<seq>|<token> <arrival> <lease end ms>|...': seq counts the arrivals, each waiter's arrival
-- is its number in that count, its lease end when it leaves the line unless it asks again. A
-- string, so the line needs no command the lock itself does not (GET, SET, DEL). The loader
-- (scripts.py) puts _common.lua and this file in front of each of them.

-- line_read(key, now, token): the line as it stands.
-- Returns the arrivals counted, token's arrival (nil: not in line), and the other waiters whose
-- lease has not ended ({arrival, token, lease end} each).
local function line_read(key, now, token)
  local v = redis.pcall('get', key)
  local seq, mine, live = 0, nil, {}
  if type(v) ~= 'string' then
    return seq, mine, live
  end
  for part in string.gmatch(v, '[^|]+') do
    local t, a, l = string.match(part, '^(%S+) (%d+) (%d+)$')
    if not t then
      seq = tonumber(part) or seq
    elseif t == token then
      mine = tonumber(a)
    elseif tonumber(l) > now then
      live[#live + 1] = {tonumber(a), t, tonumber(l)}
    end
  end
  return seq, mine, live
end

-- line_write(key, now, seq, waiters): the line as these waiters ({arrival, token, lease end}); it
-- lives until the last lease ends, and is gone with no waiter left.
local function line_write(key, now, seq, waiters)
  if #waiters == 0 then
    redis.call('del', key)
    return
  end
  local parts, last = {string.format('%d', seq)}, now + 1
  for _, w in ipairs(waiters) do
    parts[#parts + 1] = w[2] .. ' ' .. string.format('%d', w[1]) .. ' ' .. string.format('%d', w[3])
    if w[3] > last then
      last = w[3]
    end
  end
  redis.call('set', key, table.concat(parts, '|'), 'px', string.format('%d', last - now))
end

-- line_ahead(live, mine): how many live waiters came before arrival mine, and the soonest end of
-- their leases (nil: none).
local function line_ahead(live, mine)
  local ahead, first = 0, nil
  for _, w in ipairs(live) do
    if w[1] < mine then
      ahead = ahead + 1
      if not first or w[3] < first then
        first = w[3]
      end
    end
  end
  return ahead, first
end

-- line_tell(line, live, position): tell the live waiter at this position in line (from 1, in order
-- of arrival) that a freed place may now be its: published on its own channel, '<line key>:<token>'.
-- Only the first waiters in line (as many as the key has places) listen on the key's channel, so a
-- release wakes them alone; the others wait for this word (line.py).
local function line_tell(line, live, position)
  if position < 1 or #live < position then
    return
  end
  table.sort(live, function(a, b) return a[1] < b[1] end)
  redis.call('publish', line .. ':' .. live[position][2], 'turn')
end
