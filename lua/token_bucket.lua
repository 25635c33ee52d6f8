-- token_bucket.lua: one atomic token-bucket decision. Read, lazy refill,
-- compare and write happen in one script (see lua.go for how the function
-- becomes one), on the shard that owns the key, on that shard's clock.
--
-- Exact integer units, so that 1 per hour and 10,000,000 per second are both
-- exact: a token is `scale` units, the bucket refills `refill` units per
-- microsecond and holds at most `capacity` = limit x scale units. The caller
-- keeps every quantity below 2^53, where a Lua number is still an exact
-- integer. Time is microseconds from the shard's TIME command.
--
-- st        the stored state {v, t, s}: units, time of v in us, scale of v
--           (each nil when the key has none); lua.go reads and writes it
-- capacity  units
-- refill    units per microsecond
-- scale     units per token
-- cost      tokens wanted
-- op        0 take; 1 peek (report only, spend nothing);
--           2 claim (a lease: take up to cost whole tokens, as many as
--           exist); 3 return (give cost unused tokens back; a negative
--           cost is RL.ADJUST's spend of -cost without a check, which
--           may leave v below 0, a debt of at most one capacity, that
--           refill pays before anything is admitted)
-- now       the shard's clock, microseconds
-- from      for a claim: hold the bucket until |from| (us), after the
--           claim: nothing refills before it (the main bucket of a split
--           hot key, whose budget the sub-buckets hold meanwhile). A
--           positive from starts a hold only when none is in force; a
--           negative one extends the hold in force (or starts one). The
--           7th value of the reply is the hold in force before the claim
--           (0: none); a from in the past (1) only asks for it.
--           (retry_after and reset_after count the refill only, not the
--           rest of a hold; the TTL covers both.)
--
-- Returns {allowed, limit, remaining, retry_after_ms, reset_after_ms, granted,
-- 0} (the 7th value is the windows' start, which a bucket has not):
-- allowed 1|0; remaining whole tokens; retry_after_ms -1 when allowed or when
-- cost > limit, else ms until cost tokens exist, rounded up (never 0);
-- reset_after_ms until the bucket is full, rounded up; granted the tokens a
-- claim took. A claim that gets nothing retries after one token exists.
-- The second value returned is the state to store: nil when nothing
-- changed (a rejected or peeked request), false to delete it (a full bucket
-- is the same as none), else {v, t, s, ttl_ms} with a TTL of the time to
-- refill fully plus one second.

local function token_bucket(st, capacity, refill, scale, cost, op, now, from)
  local limit = capacity / scale
  local v = st[1]
  local at = st[2]
  if v == nil or at == nil then
    v = capacity
    at = now
  else
    local s = st[3]
    if s ~= nil and s ~= scale then
      -- the policy changed its units: convert, rounding down
      v = math.floor(v / s * scale)
    end
    if now > at then
      -- elapsed * refill is exact below 2^53; above it the bucket is full anyway
      v = v + (now - at) * refill
      at = now
    end
    if v > capacity then
      v = capacity
    elseif v < 0 and v < debt_floor(capacity) then -- see bucket.lua
      v = debt_floor(capacity)
    end
  end
  local held = 0 -- a hold in force: nothing refills before at
  if at > now then held = at end

  local per_ms = refill * 1000
  local allowed, retry, granted, write = 0, -1, 0, false
  if op == 2 then
    granted = math.max(0, math.min(cost, math.floor(v / scale))) -- v < 0 in debt
    if granted > 0 then
      allowed = 1
      v = v - granted * scale
      write = true
    elseif cost <= 0 then
      allowed = 1 -- a claim of nothing gets nothing, at once
    else
      retry = math.ceil((scale - v) / per_ms)
    end
    local h = hold_until(at, held, now, from) -- see bucket.lua
    if h ~= nil then
      at = h
      if v > 0 then v = 0 end -- what a claim of whole tokens left (a fraction) goes too; a debt stays
      write = true
    end
  else
    allowed, retry, v, write = spend_units(v, capacity, scale, limit, per_ms, cost, op)
  end
  local reset = math.ceil((capacity - v) / per_ms)
  local new = nil
  if write and v >= capacity then
    new = false
  elseif write then
    local ttl = reset + 1000
    if at > now then ttl = ttl + math.ceil((at - now) / 1000) end
    new = {v, at, scale, ttl}
  end
  local reply7 = 0
  if op == 2 and from ~= nil and from ~= 0 then reply7 = held end
  local remaining = 0 -- whole tokens; none in debt
  if v >= scale then remaining = math.floor(v / scale) end

  return {allowed, limit, remaining, retry, reset, granted, reply7}, new
end
