-- gcra.lua: TODO

local function gcra(key, a1, a2, a3, cost, op, now)
  return redis.error_reply('gcra: not written yet')
end
