-- expect: error attempt to load a binary chunk
return assert(load("\27Lua", "x", "bt"))()
