-- expect: error larger than the output buffer
return string.rep("x", 20000)
