-- expect: result ok
setmetatable({}, {__gc = function() error("in gc") end}) collectgarbage() return "ok"
