-- expect: error resulting string too large
return string.rep("ab", 1 << 62)
