-- strings: find, match, gsub, format, byte/char, rep, reverse, case
local s = "The quick brown fox jumps over the lazy dog"
print(#s, s:upper(), s:lower())
print(s:find("quick"), s:find("o", 15, true), s:match("(%a+) dog$"))
print((s:gsub("%w+", function(w) return w:sub(1, 1):upper() .. w:sub(2) end)))
print(s:gsub("o", "0", 2))
for w in s:gmatch("%a%a%a%a%a") do io_write = (io_write or "") .. w .. "," end
print(io_write)
print(("abc"):rep(3, "-"), ("hello"):reverse(), ("x"):byte(), string.char(72, 105))
print(string.format("%5d|%-5d|%05.1f|%x|%X|%o|%q", 42, 42, 3.14159, 255, 255, 8, "a\nb\"c"))
print(string.format("%s %s %s", 1, 1.0, true), tostring(nil), ("%d%%"):format(50))
print(("  trim me  "):match("^%s*(.-)%s*$") .. "|", ("key=value"):match("(%w+)=(%w+)"))
print(("2024-01-15"):match("(%d+)-(%d+)-(%d+)"))
print(string.format("%-10s|%10s|", "left", "right"), ("%c%c%c"):format(76, 117, 97))
print(("a,b,,c"):gsub(",", ";"), ("CamelCaseString"):gsub("(%u)", " %1"))
print(string.find("a.b", ".", 1, true), string.find("a+b", "+", 1, true), ("%a"):len())
