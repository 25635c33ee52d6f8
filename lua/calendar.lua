-- calendar.lua: one atomic calendar-window decision (a fixed window whose
-- windows are a time zone's days, weeks, months or years). Lua has no time
-- zones: sluice computes, on its own clock, the window its clock is in and
-- the next one (limit.CalendarWindow), and the shard's clock picks among
-- three windows: the one that ends at start, [start, e1) and [e1, e2), so
-- that the shard decides by its own clock even when sluice's is a window
-- edge away. A window's state is named by its END, which is known for all
-- three (the first one's start is not). Time is microseconds from the
-- shard's TIME command.
--
-- st     the stored state {w, c}: w = the end of the window the count c
--        was taken in, us (each nil when the key has none)
-- limit  per window
-- start  the start of sluice's window, us
-- lens   its length and the next window's, s: len * 2^25 + next
-- cost, op, now, from  as fixed_window.lua; from names a window by its end
--
-- Returns fixed_window.lua's reply, its 7th value the window's end (what a
-- return names), and the state to store ({e, c, 0, ttl_ms}, TTL the rest
-- of the window plus one second). The stored count is the window's when w
-- lies in it (a count kept under a shorter or other calendar window moves
-- into the window that contains its end; a count above the limit is
-- clamped), and forgotten when w is at or before the window's start. A
-- state of a later window of the three (w = e1 or e2) keeps the key in
-- that window: a clock behind the stored window reads as that window, as
-- in fixed_window.lua. A shard clock past e2 (sluice's clock more than a
-- window behind it) finds no window: everything is refused, nothing is
-- written.

local function calendar_window(st, limit, start, lens, cost, op, now, from)
  local len = math.floor(lens / 33554432)
  local e1 = start + len * 1000000
  local e2 = e1 + (lens - len * 33554432) * 1000000
  local e, lo = start, nil -- the window's end, and its start when known
  if now >= e1 then
    e, lo = e2, e1
  elseif now >= start then
    e, lo = e1, start
  end
  local beyond = now >= e2
  local w, c = st[1], 0
  if w ~= nil and st[2] ~= nil then
    if w > e and (w == e1 or w == e2) then
      e, c = w, st[2]
    elseif lo == nil or w > lo then
      c = st[2]
    end
  end
  if c > limit or beyond then c = limit end
  local left = math.max(1, math.ceil((e - now) / 1000)) -- ms until the window ends

  local allowed, granted, write, wait = 1, 0, false, nil
  if not beyond and (op ~= 3 or from == 0 or from == e) then
    allowed, granted, c, write, wait = decide_window(limit, c, limit - c, cost, op) -- see window.lua
  elseif op ~= 3 then
    allowed, granted, c, write, wait = decide_window(limit, c, 0, cost, op)
    write = false
  end
  local retry = -1
  if wait ~= nil then retry = left end
  local reset = 0
  if c > 0 then reset = left end
  local new = nil
  if write and c == 0 then
    new = false
  elseif write then
    new = {e, c, 0, reset + 1000}
  end

  return {allowed, limit, limit - c, retry, reset, granted, e}, new
end
