-- bucket.lua: what the two bucket algorithms (token_bucket.lua, gcra.lua)
-- decide alike, on v, the units the token bucket holds (under GCRA the
-- capacity minus the debt, which may be negative). local/bucket.go has the
-- same two parts, spendUnits and holdUntil.

-- debt_floor is the fewest units a bucket may hold: a debt (RL.ADJUST
-- spending more than there is) of at most one capacity, and never so deep
-- that capacity - v leaves 2^53 (gcra.lua's maxd is the same bound).
local function debt_floor(capacity)
  if capacity > 4503599627370495 then return capacity - 9007199254740991 end
  return -capacity
end

-- spend_units decides a return (op 3), a take (0) or a peek (1) of cost
-- tokens on v units: a return gives cost back, never above the capacity,
-- and a return of a negative cost (an RL.ADJUST that spends) spends -cost
-- without a check, down to debt_floor; a take or a peek admits cost when v
-- holds it (a take spends it), else says when it will, unless cost >
-- limit, which never fits. It returns allowed, retry_after_ms, v after the
-- decision and whether to write it.
local function spend_units(v, capacity, scale, limit, per_ms, cost, op)
  if op == 3 then
    if cost < 0 then return 1, -1, math.max(debt_floor(capacity), v + cost * scale), true end
    if cost >= limit and v < 0 then
      -- in debt: limit of the tokens given back pay capacity units first,
      -- so that cost * scale below stays under capacity, exact
      v = v + capacity
      cost = cost - limit
    end
    if cost >= limit then return 1, -1, capacity, true end
    return 1, -1, math.min(capacity, v + cost * scale), true
  end
  if cost > limit then return 0, -1, v, false end
  local need = cost * scale
  if v < need then return 0, math.ceil((need - v) / per_ms), v, false end
  if op == 0 then return 1, -1, v - need, true end
  return 1, -1, v, false
end

-- hold_until is the hold of a claim (a split key's main bucket): the time
-- the bucket is held until, nothing refilling before it, when from asks
-- for one ahead of now and either none is in force (held is 0) or from is
-- negative (extend the hold in force to -from); else nil.
local function hold_until(at, held, now, from)
  if from ~= nil and math.abs(from) > now and (held == 0 or from < 0) then
    return math.max(at, math.abs(from))
  end
  return nil
end
