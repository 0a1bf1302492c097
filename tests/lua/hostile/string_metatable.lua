-- expect: error attempt to index a boolean value
getmetatable("").__index = function() return 1 end
