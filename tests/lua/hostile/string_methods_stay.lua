-- expect: result true	X	nil
return getmetatable("") == false, ("x"):upper(), pcall(setmetatable, "", {}) and "set" or nil
