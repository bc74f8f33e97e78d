-- Helpers shared by the place_*.lua scripts (see places.py for a place's value and the key's
-- fields). The loader (scripts.py) puts _common.lua and this file in front of each of them.
-- It names no KEYS or ARGV of its own: the calling script passes its keys and arguments in.

-- now_ms(): the server's clock, in ms since the epoch.
local function now_ms()
  return math.floor(now_us() / 1000)
end

-- ms(x): a number of ms as an integer string (never in exponent notation).
local function ms(x)
  return string.format('%d', x)
end

-- place_parts(v): a place's state, flags, lease end and window end (ms), and the rest of
-- its value after the window end (' <hb> <ttl> ...', with its leading space).
local function place_parts(v)
  local state, flags, lease, keep, rest = string.match(v, '^(%S+) (%S+) (%d+) (%d+)(.*)$')
  return state, flags or '-', tonumber(lease or '0'), tonumber(keep or '0'), rest or ''
end

-- ends_at(state, lease, keep): when a place in that state frees: its window end once
-- released, else the later of its lease end and its window end.
local function ends_at(state, lease, keep)
  if state == 'released' then
    return keep
  end
  return math.max(lease, keep)
end

-- place_end(v): when the place v frees (ends_at of its parts).
local function place_end(v)
  local state, _, lease, keep = place_parts(v)
  return ends_at(state, lease, keep)
end

-- holds(v, now): whether a place's token still holds it (neither released nor lapsed).
local function holds(v, now)
  local state, _, lease = place_parts(v)
  return state ~= 'released' and lease > now
end

-- task_of(v): the task id a place's value names (its last field; a tab and the call's
-- description may follow it, see record.py).
local function task_of(v)
  return string.match(v, '^%S+ %S+ %S+ %S+ %S+ %S+ %S+ %S+ %S+ ([^\t]*)')
end

-- A turn (see places.py) is a field '~t<task id>' -> '<at> <lapses>': the call of that task id
-- may take a place from <at> on, before calls that hold no turn; the turn lapses at <lapses>,
-- a window after <at>, and at least TURN_GRACE_MS (a call late by more has lost its turn).
local TURN_GRACE_MS = 5000

-- survey(key, now, token[, task]): drop the places and turns that ended, and describe the others.
-- Returns: the value under token (nil when none), how many other places are live, the value,
-- end and token of the one that frees soonest, the soonest window end among the others (nil:
-- none, or one of them is a run past its window's end, which may free at any moment), the
-- latest end of any live place or turn (0: none), the token and value of another place held (not
-- released) under the task id task (nil: none; task nil or '': not looked for), the window ends
-- of the other places, the other turns ({at, task id} each) and the task's own turn (nil: none).
local function survey(key, now, token, task)
  local all = redis.call('hgetall', key)
  local mine, count, soon_v, soon_e, soon_f, window, last = nil, 0, nil, nil, nil, nil, 0
  local twin_f, twin_v, unbounded = nil, nil, false
  local keeps, turns, my_turn = {}, {}, nil
  local turn_f = task and task ~= '' and ('~t' .. task) or nil
  for i = 1, #all, 2 do
    local field, v = all[i], all[i + 1]
    if string.sub(field, 1, 2) == '~t' then
      local at, lapses = string.match(v, '^(%d+) (%d+)$')
      at, lapses = tonumber(at or '0'), tonumber(lapses or '0')
      if lapses <= now then
        redis.call('hdel', key, field)
      else
        if lapses > last then
          last = lapses
        end
        if field == turn_f then
          my_turn = at
        else
          turns[#turns + 1] = {at, string.sub(field, 3)}
        end
      end
    elseif string.byte(field, 1) ~= 126 then -- '~': the key's own fields (~n, ~w)
      local state, _, lease, keep = place_parts(v)
      local e = ends_at(state, lease, keep)
      if e <= now then
        redis.call('hdel', key, field)
      else
        if e > last then
          last = e
        end
        if field == token then
          mine = v
        else
          count = count + 1
          if not soon_e or e < soon_e then
            soon_v, soon_e, soon_f = v, e, field
          end
          keeps[#keeps + 1] = keep
          if keep <= now then
            unbounded = true
          elseif not window or keep < window then
            window = keep
          end
          if state ~= 'released' and task and task ~= '' and task_of(v) == task then
            twin_f, twin_v = field, v
          end
        end
      end
    end
  end
  if unbounded then
    window = nil
  end
  return mine, count, soon_v, soon_e, soon_f, window, last, twin_f, twin_v, keeps, turns, my_turn
end

-- opens_at(now, window): when a key with that window may next be granted a place on this server
-- (nil: now). A server that started less than a window ago may have lost the places it granted
-- within the window before its start (a restart without its data): until a window has passed
-- since, no place is granted, so a call comes late rather than twice. INFO counts from the whole
-- second the server started in, so the server may be up to 1 s younger than it says: a second
-- is taken off.
local function opens_at(now, window)
  if window <= 0 then
    return nil
  end
  local up = uptime_ms() - 1000
  if up >= window then
    return nil
  end
  return now + window - up
end

-- next_turn(now, limit, window, keeps, turns): when a call queued behind the places whose windows
-- end at keeps and behind the turns handed out already may take a place: the limit-th latest of
-- those window ends (a turn's place is kept a window from its start), and not before now.
local function next_turn(now, limit, window, keeps, turns)
  local ends = {}
  for _, keep in ipairs(keeps) do
    ends[#ends + 1] = keep
  end
  for _, turn in ipairs(turns) do
    ends[#ends + 1] = turn[1] + window
  end
  table.sort(ends, function(a, b) return a > b end)
  return math.max(ends[limit] or now, now)
end

-- refused(v, e, now, count, window, same, field): a refusal's reply, {0, value, pttl, held,
-- window ms (-1: none), same token (1/0), token}, describing the place v (under the token
-- field) that frees at e.
local function refused(v, e, now, count, window, same, field)
  local w = -1
  if window then
    w = window - now
  end
  return {0, v, e - now, count, w, same, field}
end

-- keep_alive(key, ttl): the key lives at least ttl ms more (never shortened).
local function keep_alive(key, ttl)
  if redis.call('pttl', key) < ttl then
    redis.call('pexpire', key, ms(ttl))
  end
end

-- refit(key, now): the key lives exactly as long as its latest place; gone with none left.
local function refit(key, now)
  local _, count, _, _, _, _, last = survey(key, now, '')
  if last <= now then
    redis.call('del', key)
  else
    redis.call('pexpire', key, ms(last - now))
  end
end

-- announce(key): tell a waiter that asked (~w) that a place was let go.
local function announce(key)
  if redis.call('hdel', key, '~w') == 1 then
    redis.call('publish', key, 'released')
  end
end
