-- heap: 64M
-- expect: result C stack overflow
local function f() return coroutine.resume(coroutine.create(f)) end return select(-1, f())
