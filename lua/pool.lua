-- pool.lua: one atomic decision on a region's pool of tokens. Read, compare
-- and write happen in one script (see lua.go for how the function becomes
-- one), on the shard that owns the key, on that shard's clock.
--
-- A pool is not a bucket: it never refills by itself. A background
-- allocator claims batches of tokens from the home store's global bucket
-- and adds them here (op 3); requests spend them (op 0). An absent key is
-- an EMPTY pool, the opposite of the bucket algorithms, and a pool that
-- ends at 0 tokens is deleted (the same thing). Whole tokens only; the
-- caller keeps limit x token_us below 2^53, where a Lua number is still an
-- exact integer.
--
-- st        the stored state {v, t, s}: whole tokens, time of the last
--           write in us, 0 (each nil when the key has none: empty)
-- limit     tokens; the pool never holds more (a stored v above it, after
--           the limit was lowered, reads as limit)
-- token_us  us per token at the policy's rate: the time the home bucket
--           takes to make one, for retry_after_ms and reset_after_ms
-- ttl_ms    the TTL of a written pool: one unused for that long is gone
-- cost      tokens; a cost of 0 or less is allowed and changes nothing
-- op        0 take: cost <= v spends cost, else rejected and nothing
--           changes; 1 peek: as take, writes nothing; 2 claim (drain):
--           takes min(cost, v), allowed when it got any; 3 return (fill):
--           v = min(limit, v + cost), always allowed
-- now       the shard's clock, microseconds
--
-- Returns {allowed, limit, remaining, retry_after_ms, reset_after_ms, granted,
-- 0} (the 7th value is the windows' start, which a bucket has not):
-- remaining = v after the decision; retry_after_ms -1 when allowed or when
-- cost > limit (it can never succeed), else max(1, ceil((cost - v) x
-- token_us / 1000)) (a claim that gets nothing retries as a take of 1);
-- reset_after_ms ceil((limit - v) x token_us / 1000), the time the home
-- bucket needs for what the pool misses; granted what a claim took. The
-- second value returned is the state to store: nil when nothing changed (a
-- rejected, peeked or zero request), false to delete it (v = 0), else
-- {v, now, 0, ttl_ms}. A return to a full pool changes no token but is
-- written: it renews the TTL, as a fill is the allocator's contact.

local function pool(st, limit, token_us, ttl_ms, cost, op, now)
  local v = st[1] or 0
  if v > limit then v = limit end

  local allowed = 0
  local retry = -1
  local granted = 0
  local write = false
  local function wait(n)
    if n > limit then return -1 end
    return math.max(1, math.ceil((n - v) * token_us / 1000))
  end
  if cost <= 0 then
    allowed = 1
  elseif op == 3 then
    allowed = 1
    v = math.min(limit, v + cost)
    write = true
  elseif op == 2 then
    granted = math.min(cost, v)
    if granted > 0 then
      allowed = 1
      v = v - granted
      write = true
    else
      retry = wait(1)
    end
  elseif cost <= v then
    allowed = 1
    if op == 0 then
      v = v - cost
      write = true
    end
  else
    retry = wait(cost)
  end
  local new = nil
  if write and v <= 0 then
    new = false -- an empty pool is the same as none
  elseif write then
    new = {v, now, 0, ttl_ms}
  end

  return {allowed, limit, v, retry, math.ceil((limit - v) * token_us / 1000), granted, 0}, new
end
