-- expect: error custom message
error(setmetatable({}, {__tostring = function() return "custom message" end}))
