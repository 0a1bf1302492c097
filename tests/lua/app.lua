-- app.lua: the program the Lua tests and `strata bench lua` snapshot once loaded: handle(req) formats and sorts a few values.
served = 0

function handle(req)
	served = served + 1
	local items = {}
	for name, qty in req:gmatch("(%a+)=(%d+)") do
		items[#items + 1] = {name = name, qty = tonumber(qty)}
	end
	table.sort(items, function(a, b) return a.qty > b.qty or (a.qty == b.qty and a.name < b.name) end)
	local out = {}
	for i, it in ipairs(items) do
		out[i] = string.format("%s:%d(%.1f%%)", it.name, it.qty, 100 * it.qty / #req)
	end
	return table.concat(out, " ")
end
