-- heap: 64M
-- expect: error C stack overflow
local function cmp(a, b) table.sort({3, 2, 1}, cmp) return a < b end
table.sort({5, 4, 3, 2, 1}, cmp)
