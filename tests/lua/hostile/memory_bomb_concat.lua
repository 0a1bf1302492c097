-- expect: error not enough memory
local s = "x" for i = 1, 64 do s = s .. s end return #s
