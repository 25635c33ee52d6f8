-- fixed_window.lua: TODO

local function fixed_window(key, a1, a2, a3, cost, op, now)
  return redis.error_reply('fixed_window: not written yet')
end
