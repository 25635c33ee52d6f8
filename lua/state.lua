-- state.lua: how every algorithm's state is kept in Redis, and the state of
-- one script call. The algorithm functions never touch Redis: they take the
-- stored state and return the state to store, so that one script can read
-- every key it decides first, decide them in order in memory (the same key
-- twice sees its own earlier decision), and write each changed key once.
--
-- A key's value is one string: a tag for the algorithm and its integer
-- fields, `<tag><f1>:<f2>[:<f3>]`, written with SET ... PX: two commands a
-- decision (GET, SET), where a hash took three (HMGET, HSET, PEXPIRE), and
-- fewer bytes. The tags: b token bucket {v, t, s}, g GCRA {a, d, u}, w the
-- windows {w, c[, p]} (the two window algorithms share their fields, as
-- their hashes did). A value of another tag reads as no state: a key whose
-- policy changes algorithm starts afresh. A hash, as sluice wrote before,
-- is read by its field names and replaced by a string at the next write.
--
-- Integers are written with %d: exact below 2^53, where every field is.

local tags = {'b', 'g', 'w', 'w'}
local hashfields = {{'v', 't', 's'}, {'a', 'd', 'u'}, {'w', 'c', 'p'}, {'w', 'c'}}

-- read returns key's raw state as {tag, f1, f2, f3} ({} when it has none),
-- or nil and the error of a key this node cannot read (a key of another
-- node, a migrating slot, a cluster that is down) or that holds something
-- sluice did not write. It never raises, so that a batch can mark the key.
local function read(key, id)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    if string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then return nil, v end
    local h = redis.pcall('HMGET', key, unpack(hashfields[id]))
    if h.err then return nil, h end
    return {tags[id], tonumber(h[1]), tonumber(h[2]), tonumber(h[3])}
  end
  if not v then return {} end
  local t, a, b, c = string.match(v, '^(%a)(%-?%d+):(%-?%d+):?(%-?%d*)$')
  if t == nil then
    return nil, {err = 'WRONGTYPE the key holds a value that sluice did not write'}
  end
  return {t, tonumber(a), tonumber(b), tonumber(c)}
end

-- fields returns the state an algorithm sees in raw: its fields when raw
-- carries its tag, else none.
local function fields(raw, id)
  if raw[1] ~= tags[id] then return {} end
  return {raw[2], raw[3], raw[4]}
end

-- after returns raw as it is once an algorithm's new state (nil: unchanged,
-- false: deleted, {f1, f2, f3, ttl_ms}) is stored, and the TTL to set.
local function after(raw, id, new)
  if new == nil then return raw, nil end
  if new == false then return {}, nil end
  return {tags[id], new[1], new[2], new[3]}, new[4]
end

-- write stores raw for key: a string with a TTL of ttl ms, or no key.
local function write(key, raw, ttl)
  if raw[1] == nil then
    redis.call('DEL', key)
    return
  end
  local v = raw[1] .. string.format('%d:%d', raw[2], raw[3])
  if raw[4] ~= nil and raw[4] ~= 0 then -- a window's p of 0 is left out
    v = v .. string.format(':%d', raw[4])
  end
  redis.call('SET', key, v, 'PX', ttl)
end
