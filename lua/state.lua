-- state.lua: how every algorithm's state is kept in Redis, and the state of
-- one script call. The algorithm functions never touch Redis: they take the
-- stored state and return the state to store, so that one script can read
-- every key it decides first, decide them in order in memory (the same key
-- twice sees its own earlier decision), and write each changed key once.
--
-- A key's value is one string of 25 bytes: a tag for the algorithm and its
-- three fields as little-endian doubles (struct.pack '<ddd'; every field is
-- an integer below 2^53, which a double holds exactly), written with SET
-- ... PX: two commands a decision (GET, SET), where a hash took three
-- (HMGET, HSET, PEXPIRE), and a value short enough for Redis to keep inside
-- the key's object. The tags: b token bucket {v, t, s}, g GCRA {a, d, u},
-- w the windows {w, c, p} (the two window algorithms share their fields, as
-- their hashes did; the fixed window's p is 0), p a region's pool {v, t, 0},
-- c a calendar window {e, c, 0} (its own tag: its w is a window's end, not
-- a start, so a policy that moves between fixed_window and calendar never
-- reads the other's state as its own).
-- A value of another tag reads as spent (see fields): a key whose policy
-- changes algorithm starts empty, never full (a pool: empty).
-- A concurrency limit's sorted set (concurrency.lua) reads as another
-- algorithm's state too (tag z, never stored: not the calendar's c). A hash, as sluice wrote
-- before, is read by its field names and replaced by a string at the next
-- write; the pool never had a hash, so under it a hash reads as no state.

local tags = {'b', 'g', 'w', 'w', 'p', 'c'}

-- A raw state is {f1, f2, f3, tag} ({} when the key has none): the tag
-- last, so that an algorithm, which reads st[1..3], is handed raw itself
-- and an algorithm's new state {f1, f2, f3, ttl_ms} becomes raw in place
-- (see fields and after): no table is built per decision for the state.
-- none is the raw state of every key that has none; nothing writes to it.
local none = {}

-- read returns key's raw state, or nil and the error of a key this node
-- cannot read (a key of another node, a migrating slot, a cluster that is
-- down) or that holds something sluice did not write. It never raises, so
-- that a batch can mark the key.
local function read(key, id)
  local v = redis.pcall('GET', key)
  if not v then return none end
  if type(v) == 'table' then
    if string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then return nil, v end
    if redis.pcall('TYPE', key).ok == 'zset' and redis.pcall('ZSCORE', key, '!sluice:concurrency') then
      return {nil, nil, nil, 'z'} -- a concurrency limit's slots (concurrency.lua): another owner's state
    end
    local hashfields = ({{'v', 't', 's'}, {'a', 'd', 'u'}, {'w', 'c', 'p'}, {'w', 'c'}})[id]
    if hashfields == nil then
      if redis.pcall('TYPE', key).ok ~= 'hash' then
        return nil, {err = 'WRONGTYPE the key holds a value that sluice did not write'}
      end
      return none
    end
    local h = redis.pcall('HMGET', key, unpack(hashfields))
    if h.err then return nil, h end
    return {tonumber(h[1]), tonumber(h[2]), tonumber(h[3]), tags[id]}
  end
  if #v == 25 then
    local t, a, b, c = struct.unpack('<c1ddd', v)
    if t == 'b' or t == 'g' or t == 'w' or t == 'p' or t == 'c' then return {a, b, c, t} end
  end
  return nil, {err = 'WRONGTYPE the key holds a value that sluice did not write'}
end

-- fields returns the state an algorithm sees in raw when raw carries
-- another algorithm's tag (its own tag, or none, it sees in raw as it is,
-- see decide). A state another algorithm wrote
-- (the key's policy changed algorithm) is never read as a fresh, full
-- bucket: it reads as spent now, a bucket empty at now (limit and unit
-- are the policy's parameters, as lua.go names them: a bucket's capacity
-- and scale, a window's limit), a window whose count is its limit (a
-- calendar window's: a count taken just after now, which is in the
-- current window); a pool, which starts empty anyway, as none.
local function fields(raw, id, limit, unit, now)
  if id == 5 then return none end
  if id == 1 then return {0, now, unit} end
  if id == 2 then return {now, limit, unit} end
  if id == 6 then return {now + 1, limit, 0} end
  return {now, limit, 0}
end

-- decide runs algorithm alg (id) on raw's state, as fields reads it, with
-- the policy's parameters limit, rate and unit (lua.go), and returns its
-- reply and the state to store. A return (op 3) to a state
-- another algorithm wrote gives nothing: its tokens came from a state that
-- is gone, as from a closed window, and storing it would credit the new
-- owner (a window's count lowered to 0 deletes the key, and a bucket then
-- reads it full); its reply is a peek of nothing on the spent state. A
-- return of a negative cost (RL.ADJUST's spend) is a spend, and stored. A
-- pool is the exception: a fill is how its tokens come in, and another
-- state under its key reads as none (see fields).
-- local/state.go's decideFrom (local.Decide) does the same.
local function decide(alg, raw, id, limit, rate, unit, cost, op, now, from)
  local t = raw[4]
  if t == nil or t == tags[id] then return alg(raw, limit, rate, unit, cost, op, now, from) end
  local st = fields(raw, id, limit, unit, now) -- another owner's state
  if op == 3 and cost >= 0 and id ~= 5 then
    return (alg(st, limit, rate, unit, 0, 1, now, 0)), nil
  end
  return alg(st, limit, rate, unit, cost, op, now, from)
end

-- after returns raw as it is once an algorithm's new state (nil: unchanged,
-- false: deleted, {f1, f2, f3, ttl_ms}) is stored, and the TTL to set. The
-- new state becomes the raw one: its ttl_ms is taken out and the tag put in
-- its place.
local function after(raw, id, new)
  if new == nil then return raw, nil end
  if new == false then return none, nil end
  local ttl = new[4]
  new[4] = tags[id]
  return new, ttl
end

-- write stores raw for key: its value with a TTL of ttl ms, or no key.
local function write(key, raw, ttl)
  if raw[4] == nil then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, struct.pack('<c1ddd', raw[4], raw[1], raw[2], raw[3] or 0), 'PX', string.format('%d', ttl))
end
