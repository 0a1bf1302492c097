-- expect: result C stack overflow
return load("return " .. string.rep("(", 300) .. "1" .. string.rep(")", 300))
