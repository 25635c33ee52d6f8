-- gcra.lua: one atomic GCRA (generic cell rate algorithm) decision. Read,
-- compare and write happen in one script (see lua.go for how the function
-- becomes one), on the shard that owns the key, on that shard's clock.
--
-- GCRA keeps the theoretical arrival time (TAT): the time at which the key
-- is owed nothing, that is full again. A request of cost tokens is admitted
-- when the TAT, moved on by cost emission intervals, lies no further than
-- the burst (limit emission intervals) ahead of now. That is the same limit
-- as a token bucket of the same policy, and every reply is the same as
-- token_bucket.lua's: the debt TAT - now, in units, is capacity minus the
-- bucket's units.
--
-- Exact integer units, as token_bucket.lua: a token is `scale` units, the
-- debt shrinks by `refill` units per microsecond and is at most `capacity`
-- = limit x scale units. The TAT is kept exactly, to a 1/refill of a
-- microsecond, as the time of the last write plus a debt in units:
--
--   TAT = a + d / refill    (a whole microseconds, d units of scale u)
--
-- The time a is kept, not only the TAT, because the shard's clock may step
-- back: a request before a sees the debt as it was at a (nothing is refilled
-- backwards, and nothing is owed twice), as the token bucket does. The debt
-- is kept in units of a token, not of time, so that a policy change of rate
-- keeps the tokens owed; a change of scale converts d, rounding up (never
-- admitting more), and a smaller limit leaves a debt above its burst (up to
-- twice it), paid before anything is admitted. The caller keeps every
-- quantity below 2^53, where a Lua number is still an exact integer. Time is
-- microseconds from the shard's TIME command.
--
-- st        the stored state {a, d, u}: a = time of the write in us,
--           d = TAT - a in units, u = scale of d (each nil when the key has
--           none: a TAT in the past, owed nothing); lua.go reads and writes it
-- capacity  units (the burst)
-- refill    units per microsecond
-- scale     units per token (the emission interval is scale/refill us)
-- cost      tokens wanted; 0 is admitted and spends nothing (a take or a
--           return of 0 writes the same TAT, as the token bucket writes the
--           same tokens, which keeps a its time)
-- op        0 take; 1 peek (report only, spend nothing);
--           2 claim (a lease: take up to cost whole tokens, as many as
--           exist); 3 return (give cost unused tokens back; a negative
--           cost is RL.ADJUST's spend, as token_bucket.lua's: the debt
--           grows past the burst, up to maxd)
-- now       the shard's clock, microseconds
-- from      for a claim: hold until then (us), as token_bucket.lua's
--
-- Returns {allowed, limit, remaining, retry_after_ms, reset_after_ms, granted,
-- 0} (the 7th value is the windows' start, which a bucket has not):
-- allowed 1|0; remaining whole tokens; retry_after_ms -1 when allowed or when
-- cost > limit, else ms until cost tokens exist, rounded up (never 0);
-- reset_after_ms until the TAT (the key is full), rounded up; granted the
-- tokens a claim took. A claim that gets nothing retries after one token
-- exists. The second value returned is the state to store: nil when nothing
-- changed (a rejected or peeked request), false to delete it (a TAT that is
-- not ahead of now is the same as no key), else {a, d, u, ttl_ms} with a TTL
-- of the time until the TAT plus one second.

local function gcra(st, capacity, refill, scale, cost, op, now, from)
  local limit = capacity / scale
  -- A debt above the burst (a limit that shrank) is kept, up to twice the
  -- burst: capped at the burst, it would be forgiven, and a limit that
  -- grows back would find tokens nobody gave back (the token bucket keeps
  -- the tokens present, which a shrinking limit caps, so it needs no such
  -- rule).
  local maxd = 2 * capacity
  if maxd > 9007199254740991 then maxd = 9007199254740991 end
  local at = st[1]
  local d = st[2]
  if at == nil or d == nil then
    d = 0
    at = now
  else
    local u = st[3]
    if u ~= nil and u ~= scale then
      -- the policy changed its units: convert, rounding the debt up
      d = math.min(maxd, math.ceil(d / u * scale))
    end
    if now > at then
      -- elapsed * refill is exact below 2^53; above it the debt is paid anyway
      d = d - (now - at) * refill
      at = now
    end
    if d < 0 then d = 0 end
    if d > maxd then d = maxd end
  end
  local held = 0 -- a hold in force: nothing is paid before at
  if at > now then held = at end

  -- v is what the token bucket would hold: the same decisions, to the unit
  local v = capacity - d
  local per_ms = refill * 1000
  local allowed, retry, granted, write = 0, -1, 0, false
  if op == 2 and cost == 0 then
    allowed = 1 -- a claim of nothing is granted nothing, and writes nothing
  elseif op == 2 then
    granted = math.max(0, math.min(cost, math.floor(v / scale)))
    if granted > 0 then
      allowed = 1
      v = v - granted * scale
      write = true
    else
      retry = math.ceil((scale - v) / per_ms)
    end
    local h = hold_until(at, held, now, from) -- see bucket.lua: nothing is paid before h
    if h ~= nil then
      at = h
      if v > 0 then v = 0 end -- what a claim of whole tokens left (a fraction) goes too
      write = true
    end
  else
    allowed, retry, v, write = spend_units(v, capacity, scale, limit, per_ms, cost, op)
  end
  d = capacity - v
  local reset = math.ceil(d / per_ms)
  local new = nil
  if write and d <= 0 then
    new = false -- a TAT not ahead of now is the same as none
  elseif write then
    -- the TAT is (at - now) + d / refill us ahead of now (at is never behind now)
    local ttl = reset + 1000
    if at > now then ttl = ttl + math.ceil((at - now) / 1000) end
    new = {at, d, scale, ttl}
  end

  local reply7 = 0
  if op == 2 and from ~= nil and from ~= 0 then reply7 = held end
  local remaining = 0 -- whole tokens; none in debt
  if v >= scale then remaining = math.floor(v / scale) end
  return {allowed, limit, remaining, retry, reset, granted, reply7}, new
end
