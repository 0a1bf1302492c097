-- utf8 library
local s = "héllo wörld ✓"
print(#s, utf8.len(s), utf8.char(72, 233, 0x2713), ("%q"):format(utf8.charpattern))
for p, c in utf8.codes("aé✓") do print(p, c) end
print(utf8.codepoint(s, 1, 3), utf8.offset(s, 3), utf8.offset(s, -1))
print(utf8.len("\xff"), utf8.len(s, 3), pcall(utf8.codepoint, "\xff"))
local out = {}
for _, c in utf8.codes("абв") do out[#out + 1] = c end
print(table.concat(out, " "), ("%s"):format(utf8.char(0x10FFFF)):len())
