-- expect: error not enough memory
return #string.rep("x", 1 << 30)
