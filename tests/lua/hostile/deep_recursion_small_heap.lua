-- expect: error not enough memory
local function f() return 1 + f() end return f()
