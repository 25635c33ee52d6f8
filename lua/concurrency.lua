-- concurrency.lua: a concurrency limit (algorithm: concurrency), at most
-- `limit` slots held at once. local/concurrency.go decides the same.
--
-- A key's slots are one sorted set: member = the slot's token (made by
-- sluice from crypto/rand, 128 bits in hex), score = the slot's expiry, µs
-- on this shard's clock. One more member, the owner marker `marker` with
-- score 0, says that sluice's concurrency algorithm wrote the set: the
-- rate algorithms keep strings (state.lua), so a key's Redis type and the
-- marker name its owner, and no algorithm reads another's state as its
-- own. A state another algorithm wrote (any tag of state.lua: b, g, w, p,
-- c, or a hash of an earlier sluice) holds no slot of this policy: acquire
-- reads it as none held and replaces it, so slots held never exceed the
-- limit, and a key whose policy changed to concurrency works at once
-- rather than after that state's TTL (a calendar year's is most of a
-- year). The rate algorithms read a set of slots as spent (state.lua).
-- local/concurrency.go answers the same. Expired slots (score <= now) are dropped before a count; the
-- marker, at 0, never is. The key's TTL is the latest expiry plus one
-- second, so a set whose holders all crashed is gone by itself.

local marker = '!sluice:concurrency'

-- slots_state reports what key holds: 'none', 'slots' (a set sluice
-- wrote), 'other' (another algorithm's state: a string or hash sluice
-- wrote), or nil and an error for anything else.
local function slots_state(key)
  local t = redis.call('TYPE', key).ok
  if t == 'none' then return 'none' end
  if t == 'zset' then
    if redis.call('ZSCORE', key, marker) then return 'slots' end
  elseif t == 'hash' then
    return 'other'
  elseif t == 'string' then
    local v = redis.call('GET', key)
    local tag = string.sub(v, 1, 1)
    if #v == 25 and (tag == 'b' or tag == 'g' or tag == 'w' or tag == 'p' or tag == 'c') then return 'other' end
  end
  return nil, {err = 'WRONGTYPE the key holds a value that sluice did not write'}
end

local function ceil_ms(us)
  return math.ceil(us / 1000)
end

-- acquire takes a slot for token until now + ttl_ms if fewer than limit
-- are held. Returns {allowed, limit, free slots after, retry_after_ms,
-- reset_after_ms, 0, 0}: retry_after_ms -1 when allowed, else ms until the
-- earliest held slot frees (at least 1); reset_after_ms until every slot
-- held after the decision frees (0: none held).
--
-- A key holding another algorithm's state (the policy changed algorithm)
-- holds none of this policy's slots: the state is replaced by the set (see
-- the header).
local function acquire(key, limit, ttl_ms, token, now)
  local kind, e = slots_state(key)
  if kind == nil then return e end
  if kind == 'other' then
    redis.call('DEL', key)
    kind = 'none'
  end
  if kind == 'slots' then redis.call('ZREMRANGEBYSCORE', key, '(0', now) end
  local held = redis.call('ZCARD', key)
  if held > 0 then held = held - 1 end
  local allowed = 0
  if held < limit then
    if kind == 'none' then redis.call('ZADD', key, 0, marker) end
    held = held + redis.call('ZADD', key, now + ttl_ms * 1000, token)
    allowed = 1
  end
  local retry, reset = -1, 0
  if held > 0 then
    local last = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    reset = ceil_ms(last - now)
    if allowed == 1 then redis.call('PEXPIRE', key, reset + 1000) end
    if allowed == 0 then
      retry = math.max(1, ceil_ms(tonumber(redis.call('ZRANGE', key, 1, 1, 'WITHSCORES')[2]) - now))
    end
  elseif kind == 'slots' then
    redis.call('DEL', key)
  end
  return {allowed, limit, math.max(0, limit - held), retry, reset, 0, 0}
end

-- release frees token's slot: {1, …} if it was held (its expiry still
-- ahead), else {0, …}; seven integers, as every script, the rest 0. The
-- set goes once its last slot does.
local function release(key, token, now)
  local kind, e = slots_state(key)
  if kind == nil then return e end
  if kind ~= 'slots' or token == marker then return {0, 0, 0, 0, 0, 0, 0} end
  local s = redis.call('ZSCORE', key, token)
  local held = 0
  if s and tonumber(s) > now then held = 1 end
  if s then redis.call('ZREM', key, token) end
  if redis.call('ZCARD', key) <= 1 then redis.call('DEL', key) end
  return {held, 0, 0, 0, 0, 0, 0}
end
