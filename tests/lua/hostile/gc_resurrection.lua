-- expect: result ok
local mt = {} mt.__gc = function() setmetatable({}, mt) end
setmetatable({}, mt) for i = 1, 10 do collectgarbage() end return "ok"
