-- expect: error not enough memory
return #("x"):rep(1e9, ",")
