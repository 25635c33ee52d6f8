-- receipt.lua: what the receipt scripts (lua/receipt.go) share. A receipt
-- is a key of its own, on the slot of the state it names, written by the
-- take it records (in the same script call) and deleted by the give-back
-- that uses it (in the same call as the credit): it exists only for a
-- spend that happened, and is good once. Its value is "cost window owner
-- expires": the take's cost, the window its tokens were taken in (the 7th
-- value of the take's reply; 0 for a bucket), the policy's owner digest
-- (limit.Policy.Owner) and the shard's time, µs, from which it is no
-- longer good (the same instant as its PX, on the clock the scripts
-- decide by: the PX only frees the memory).

-- receipt_life is the TTL in ms of the receipt of a take decided at now in
-- window by algorithm id (rate, unit its parameters, lua.go: a window's
-- ticks and tick): how long a give-back can
-- still undo it, as limit.ReceiptLifeMs. A bucket's is bucket_ms (the time
-- to refill from empty, computed by sluice); a fixed window's runs to the
-- window's end, a sliding window's to the end of the next (the count
-- weighs on it), a calendar window's (window is its end) to its end. At
-- least 1.
local function receipt_life(id, rate, unit, window, now, bucket_ms)
  if id == 1 or id == 2 then return bucket_ms end
  local untilus = window
  if id ~= 6 then
    local len = rate * unit
    untilus = window + len
    if id == 3 then untilus = untilus + len end
  end
  return math.max(1, math.ceil((untilus - now) / 1000))
end

-- receipt_value is the stored value of a receipt.
local function receipt_value(cost, window, owner, expires)
  return string.format('%d %d %s %d', cost, window, owner, expires)
end
