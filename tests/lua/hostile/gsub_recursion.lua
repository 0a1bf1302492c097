-- heap: 64M
-- expect: error C stack overflow
local function f(s) return (s:gsub(".", f)) end return f("a")
