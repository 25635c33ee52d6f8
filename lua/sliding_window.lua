-- sliding_window.lua: TODO

local function sliding_window(key, a1, a2, a3, cost, op, now)
  return redis.error_reply('sliding_window: not written yet')
end
