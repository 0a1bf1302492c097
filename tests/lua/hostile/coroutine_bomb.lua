-- expect: error not enough memory
local t = {} for i = 1, 1e7 do t[i] = coroutine.create(function() end) end
