-- window.lua: what the two window algorithms (fixed_window.lua,
-- sliding_window.lua) decide alike, as local/window.go's windowAt and
-- decideWindow.

-- window_at places the stored state st {w, c, p} (each nil when the key has
-- none) at now in windows of len us aligned to the epoch. A clock behind
-- the stored window start reads as that start: t = max(now, w), the key
-- stays in its window. The stored counts belong to the window that
-- contains w: kept when that is the current one (start), moved to the
-- previous one when w is in the window before, forgotten when older; a
-- count above limit (a lowered limit) is clamped to it. It returns t, start
-- and the current and the previous window's counts, c and p, and the
-- current window's count as stored, raw (c before the clamp: what a write
-- must keep, so that an instance still on the higher limit does not admit
-- what another instance's write under the lower one forgot).
local function window_at(st, len, limit, now)
  local w = st[1]
  local sc = st[2]
  local t = now
  if w ~= nil and sc ~= nil and w > now then t = w end
  local start = math.floor(t / len) * len
  local c = 0
  local p = 0
  if w ~= nil and sc ~= nil then
    if w >= start then
      c = sc
      p = st[3] or 0
    elseif w >= start - len then
      p = sc
    end
  end
  local raw = c
  if c > limit then c = limit end
  if p > limit then p = limit end
  return t, start, c, p, raw
end

-- decide_window decides op for cost on a window's count c, of which room
-- tokens fit now (room may be negative): a return (op 3) lowers c by cost,
-- never below 0, and a return of a negative cost (RL.ADJUST's spend) adds
-- -cost without a check, up to limit (a window cannot owe more than
-- itself: it admits nothing more until it ends); a claim (2) takes as many
-- of cost as fit; a take (0) or a
-- peek (1) admits cost when it fits (a take adds it to c), unless cost >
-- limit, which never fits. It returns allowed, granted, c after the
-- decision, whether to write it, and the tokens whose wait the caller puts
-- in retry_after_ms: 1 for a claim that got nothing, cost for a take or a
-- peek that does not fit now, nil for none (-1).
local function decide_window(limit, c, room, cost, op)
  if op == 3 and cost < 0 then return 1, 0, math.max(c, math.min(limit, c - cost)), true, nil end
  if op == 3 then return 1, 0, math.max(0, c - cost), true, nil end
  if op == 2 then
    local granted = math.max(0, math.min(cost, room))
    if granted == 0 then return 0, 0, c, false, 1 end
    return 1, granted, c + granted, true, nil
  end
  if cost > limit then return 0, 0, c, false, nil end
  if cost > room then return 0, 0, c, false, cost end
  if op == 0 then return 1, 0, c + cost, true, nil end
  return 1, 0, c, false, nil
end
