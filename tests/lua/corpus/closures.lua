-- closures, upvalues, varargs, recursion, metatables
local function counter()
	local n = 0
	return function() n = n + 1 return n end
end
local c1, c2 = counter(), counter()
print(c1(), c1(), c2(), c1())
local function sum(...)
	local s = 0
	for _, v in ipairs({...}) do s = s + v end
	return s, select("#", ...)
end
print(sum(1, 2, 3, 4.5))
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
print(fib(20))
local V = {}
V.__index = V
V.__add = function(a, b) return setmetatable({x = a.x + b.x, y = a.y + b.y}, V) end
V.__tostring = function(v) return "(" .. v.x .. ", " .. v.y .. ")" end
V.__eq = function(a, b) return a.x == b.x and a.y == b.y end
V.__lt = function(a, b) return a.x < b.x end
V.__len = function() return 2 end
V.__call = function(self, k) return self.x * k end
local function vec(x, y) return setmetatable({x = x, y = y}, V) end
local a, b = vec(1, 2), vec(3, 4.5)
print(tostring(a + b), a == vec(1, 2), a < b, #a, a(10))
local proxy = setmetatable({}, {__index = function(_, k) return k .. "!" end, __newindex = function(t, k, v) rawset(t, k, v * 2) end})
proxy.z = 21
print(proxy.hi, proxy.z)
local adders = {}
for i = 1, 3 do adders[i] = function(x) return x + i end end
print(adders[1](10), adders[3](10))
goto skip
print("not printed")
::skip::
print("after goto")
