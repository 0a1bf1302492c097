-- heap: 64M
-- expect: result C stack overflow
local function f() return pcall(f) end return select(-1, f())
