-- heap: 64M
-- expect: result C stack overflow
local function f() return coroutine.wrap(f)() end
local ok, e = pcall(f) return ok, e:match("C stack overflow")
