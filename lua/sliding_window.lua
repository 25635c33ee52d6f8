-- sliding_window.lua: one atomic sliding-window-counter decision. Read,
-- compare and write happen in one script (see lua.go for how the function
-- becomes one), on the shard that owns the key, on that shard's clock.
--
-- Windows are P = ticks ticks of `tick` microseconds, aligned to the Unix
-- epoch. The estimate of the sliding window is the current window's count c
-- plus the previous window's count p weighted by the share of it still
-- inside the sliding window, (P - e) / P, e the ticks elapsed in the current
-- window. Times P it is an exact integer, weighted = p x (P - e) + c x P,
-- compared with limit x P; limit.Window picks the tick so that every
-- product (at most 3 x limit x P) stays below 2^53, where a Lua number is
-- still an exact integer. Time is microseconds from the shard's TIME
-- command, converted to ticks by floor(now / tick).
--
-- st     the stored state {w, c, p}: w = start of the current window in us,
--        c = the count taken in it, p = the count of the window before (each
--        nil when the key has none); lua.go reads and writes it
-- limit  per window
-- ticks  window length in ticks (P)
-- tick   microseconds per tick
-- cost   wanted
-- op     0 take; 1 peek (report only, spend nothing); 2 claim (a lease:
--        take up to cost, as many as the estimate still admits); 3 return
--        (give cost back: lower the current window's count, never below 0)
-- now    the shard's clock, microseconds
-- from   for a return, the start of the window the tokens were taken in
--        (the 7th value of the take's reply): the current window's count is
--        lowered when it is the current one, the previous window's when it
--        is the one before, and nothing is given back to an older window;
--        0 means the current window (a give-back in the same script)
--
-- Returns {allowed, limit, remaining, retry_after_ms, reset_after_ms, granted,
-- start}, start the current window's start in us (what a return names):
-- allowed 1|0, 1 when weighted + cost x P <= limit x P; remaining
-- floor((limit x P - weighted) / P) after the decision, at least 0;
-- retry_after_ms -1 when allowed or when cost > limit, else the exact time
-- until weighted + cost x P <= limit x P holds, as p decays within this
-- window or else in the next one (where c becomes the previous count),
-- rounded up to ms (never 0); reset_after_ms the time until the estimate is
-- 0: the end of the next window if c > 0, else the end of this one if p > 0,
-- else 0, rounded up; granted what a claim took. A claim that gets nothing
-- retries when 1 fits.
--
-- A clock behind the stored window start reads as that start: the key stays
-- in its window, at its full weight. Stored counts belong to the window
-- that contains w: kept when that is the current window, moved to the
-- previous one when w is in the window before, forgotten when older (after
-- a change of period or tick the same rule holds); a count above the limit
-- (a lowered limit) is clamped to it. The second value returned is the
-- state to store: nil when nothing changed (a rejected or peeked request),
-- false to delete it (c = p = 0 is the same as no key), else {w, c, p,
-- ttl_ms} with a TTL of reset_after_ms plus one second (the end of the next
-- window while c > 0).

-- sliding_retry_at is the first tick at which need more fits, when it does
-- not now: full = limit x P, c and p the counts, ws the window's start in
-- ticks.
local function sliding_retry_at(need, full, c, p, ticks, ws)
  local r = full - need - c * ticks
  if p > 0 and r >= 0 then
    return ws + ticks - math.floor(r / p) -- p x (P - e') <= r in this window
  end
  return ws + ticks + math.max(0, ticks - math.floor((full - need) / c)) -- in the next
end

local function sliding_window(st, limit, ticks, tick, cost, op, now, from)
  local len = ticks * tick
  local t, start, c, p = window_at(st, len, limit, now) -- see window.lua; start in us
  local ws = start / tick -- the same, ticks
  local e = math.floor(t / tick) - ws -- ticks elapsed, 0..P-1
  local full = limit * ticks
  local weighted = p * (ticks - e) + c * ticks

  local allowed, granted, write, wait = 1, 0, false, nil
  if op ~= 3 or from == 0 or from == start then
    -- floor((full - weighted) / ticks) fit now: weighted + cost * ticks <= full
    allowed, granted, c, write, wait = decide_window(limit, c, math.floor((full - weighted) / ticks), cost, op) -- see window.lua
  elseif from == start - len then
    p = math.max(0, p - cost) -- taken in the window before
    write = true
  end
  local retry = -1
  if wait ~= nil then retry = math.ceil((sliding_retry_at(wait * ticks, full, c, p, ticks, ws) * tick - now) / 1000) end
  weighted = p * (ticks - e) + c * ticks
  local reset = 0
  if c > 0 then
    reset = math.ceil(((ws + 2 * ticks) * tick - now) / 1000)
  elseif p > 0 then
    reset = math.ceil(((ws + ticks) * tick - now) / 1000)
  end
  local new = nil
  if write and c == 0 and p == 0 then
    new = false -- an empty window is the same as none
  elseif write then
    new = {start, c, p, reset + 1000}
  end

  local remaining = math.floor((full - weighted) / ticks)
  if remaining < 0 then remaining = 0 end
  return {allowed, limit, remaining, retry, reset, granted, start}, new
end
