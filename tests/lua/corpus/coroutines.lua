-- coroutines: generators, status, wrap, yield across pcall, passing values
local function gen(n)
	return coroutine.wrap(function()
		for i = 1, n do coroutine.yield(i * i) end
		return "done"
	end)
end
local g = gen(4)
print(g(), g(), g(), g(), g())
local co = coroutine.create(function(a, b)
	print("start", a, b)
	local c = coroutine.yield(a + b)
	print("got", c)
	local d, e = coroutine.yield(c * 2)
	return d + e
end)
print(coroutine.resume(co, 1, 2))
print(coroutine.status(co))
print(coroutine.resume(co, 10))
print(coroutine.resume(co, 3, 4))
print(coroutine.status(co), coroutine.resume(co))
local co2 = coroutine.create(function()
	local ok, err = pcall(function()
		coroutine.yield("inside pcall")
		error("after yield")
	end)
	coroutine.yield(ok, err)
end)
print(coroutine.resume(co2))
print(coroutine.resume(co2))
print(coroutine.isyieldable(), type(coroutine.running()), select(2, coroutine.running()))
local function producer()
	return coroutine.create(function()
		for _, w in ipairs({"a", "b", "c"}) do coroutine.yield(w) end
	end)
end
local p, out = producer(), {}
while true do
	local _, v = coroutine.resume(p)
	if not v then break end
	out[#out + 1] = v
end
print(table.concat(out, "+"), coroutine.close(coroutine.create(print)))
