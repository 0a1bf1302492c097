-- expect: error not enough memory
collectgarbage("stop") local t = {} for i = 1, 1e7 do t[#t + 1] = tostring(i) end
