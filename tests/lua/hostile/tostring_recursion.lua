-- heap: 64M
-- expect: error C stack overflow
local mt = {} mt.__tostring = function() return tostring(setmetatable({}, mt)) end
return tostring(setmetatable({}, mt))
