-- expect: error '__tostring' must return a string
return tostring(setmetatable({}, {__tostring = function() return {} end}))
