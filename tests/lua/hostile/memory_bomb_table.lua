-- expect: error not enough memory
local t = {} for i = 1, 1e9 do t[i] = {} end
