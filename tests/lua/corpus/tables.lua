-- tables: construction, length, insert/remove, concat, unpack, sort, pairs order of arrays
local t = {10, 20, 30, n = 3}
table.insert(t, 40)
table.insert(t, 1, 5)
print(#t, t[1], t[5], table.remove(t), table.remove(t, 1), #t)
print(table.concat(t, ", "), table.concat({}, "x"), table.concat({1, 2.5, "z"}))
print(table.unpack({1, 2, 3}))
print(select("#", table.unpack({1, nil, 3}, 1, 3)), select(2, "a", "b", "c"))
local words = {"pear", "apple", "fig", "banana", "cherry", "date"}
table.sort(words)
print(table.concat(words, " "))
table.sort(words, function(a, b) return #a < #b or (#a == #b and a < b) end)
print(table.concat(words, " "))
local nums = {}
for i = 1, 50 do nums[i] = (i * 37) % 101 end
table.sort(nums, function(a, b) return a > b end)
print(nums[1], nums[25], nums[50])
local m = table.move({1, 2, 3, 4, 5}, 2, 4, 1)
print(table.concat(m, ","))
local keys = {}
for k in pairs({a = 1, b = 2, c = 3}) do keys[#keys + 1] = k end
table.sort(keys)
print(table.concat(keys), next({}), rawlen({1, 2}), rawequal(t, t))
local packed = table.pack(1, nil, 3)
print(packed.n, packed[1], packed[2], packed[3])
