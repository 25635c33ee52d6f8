-- fixed_window.lua: one atomic fixed-window-counter decision. Read, compare
-- and write happen in one script (see lua.go for how the function becomes
-- one), on the shard that owns the key, on that shard's clock.
--
-- Windows are ticks x tick microseconds (tick is 1 for this algorithm, see
-- limit.Window), aligned to the Unix epoch, and admit at most `limit` each.
-- Every quantity is an exact integer below 2^53. Time is microseconds from
-- the shard's TIME command.
--
-- st     the stored state {w, c}: w = start of the current window in us,
--        c = the count taken in it (each nil when the key has none); lua.go
--        reads and writes it
-- limit  per window
-- ticks  window length in ticks
-- tick   microseconds per tick
-- cost   wanted
-- op     0 take; 1 peek (report only, spend nothing); 2 claim (a lease:
--        take up to cost, as many as the window still admits); 3 return
--        (give cost back: lower the window's count, never below 0)
-- now    the shard's clock, microseconds
-- from   for a return, the start of the window the tokens were taken in
--        (the 7th value of the take's reply): a return to a window that has
--        closed is a no-op, so that a give-back never credits a window it
--        was not taken from; 0 means the current window (a give-back in the
--        same script as its take)
--
-- Returns {allowed, limit, remaining, retry_after_ms, reset_after_ms, granted,
-- start}, start the current window's start in us (what a return names):
-- allowed 1|0, 1 when c + cost <= limit (c the window's count); remaining
-- limit - c after the decision; retry_after_ms -1 when allowed or when
-- cost > limit, else ms until the window ends, rounded up (never 0);
-- reset_after_ms ms until the window ends when c > 0 after the decision,
-- else 0; granted what a claim took. A claim that gets nothing retries when
-- the window ends.
--
-- A clock behind the stored window start reads as that start: the key stays
-- in its window. A stored count belongs to the window that contains w: kept
-- when that is the current window, forgotten when it is older (after a
-- change of period, a window that started before the current one is
-- forgotten); a count above the limit (a lowered limit) is clamped to it
-- for the decision, and a write keeps what is stored above it.
-- The second value returned is the state to store: nil when nothing changed
-- (a rejected or peeked request), false to delete it (a count of 0 is the
-- same as no key), else {w, c, 0, ttl_ms} with a TTL of the window's rest
-- plus one second.

local function fixed_window(st, limit, ticks, tick, cost, op, now, from)
  local len = ticks * tick
  local _, start, c, _, raw = window_at(st, len, limit, now) -- see window.lua
  local left = math.ceil((start + len - now) / 1000) -- ms until the window ends

  local allowed, granted, write, wait = 1, 0, false, nil
  if op ~= 3 or from == 0 or from == start then -- a return to a closed window gives nothing back
    allowed, granted, c, write, wait = decide_window(limit, c, limit - c, cost, op) -- see window.lua
  end
  local retry = -1
  if wait ~= nil then retry = left end
  local reset = 0
  if c > 0 then reset = left end
  -- a write under a lowered limit keeps the stored count above it: a
  -- spend never lowers it, a return lowers what is stored
  local sc = c
  if write and op == 3 and raw > c then
    if cost < 0 then sc = raw else sc = math.max(0, raw - cost) end
  end
  local new = nil
  if write and sc == 0 then
    new = false -- an empty window is the same as none
  elseif write then
    new = {start, sc, 0, left + 1000}
  end

  return {allowed, limit, limit - c, retry, reset, granted, start}, new
end
