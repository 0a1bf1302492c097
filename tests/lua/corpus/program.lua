-- a small program: word frequencies, a queue, a JSON-ish serializer
local text = [[it was the best of times it was the worst of times
it was the age of wisdom it was the age of foolishness]]
local freq = {}
for w in text:gmatch("%a+") do freq[w] = (freq[w] or 0) + 1 end
local words = {}
for w, n in pairs(freq) do words[#words + 1] = {w = w, n = n} end
table.sort(words, function(a, b) if a.n ~= b.n then return a.n > b.n end return a.w < b.w end)
for i = 1, 5 do print(words[i].w, words[i].n) end
local function ser(v, ind)
	ind = ind or ""
	if type(v) == "table" then
		local ks = {}
		for k in pairs(v) do ks[#ks + 1] = tostring(k) end
		table.sort(ks)
		local parts = {}
		for _, k in ipairs(ks) do
			local val = v[k] ~= nil and v[k] or v[tonumber(k)]
			parts[#parts + 1] = ind .. "  " .. string.format("%q", k) .. ": " .. ser(val, ind .. "  ")
		end
		return "{\n" .. table.concat(parts, ",\n") .. "\n" .. ind .. "}"
	elseif type(v) == "string" then
		return string.format("%q", v)
	end
	return tostring(v)
end
print(ser({name = "strata", tags = {"vm", "lua"}, ratio = 0.75, n = 3, ok = true}))
local Q = {first = 1, last = 0, items = {}}
function Q.push(v) Q.last = Q.last + 1 Q.items[Q.last] = v end
function Q.pop() local v = Q.items[Q.first] Q.items[Q.first] = nil Q.first = Q.first + 1 return v end
for i = 1, 5 do Q.push(i * 1.5) end
print(Q.pop(), Q.pop(), Q.last - Q.first + 1)
print(os.time{year = 2020, month = 1, day = 1, hour = 0}, os.date("!%Y-%m-%d %H:%M:%S", 86400 * 365))
print(type(os.clock()), os.difftime(10, 4))
