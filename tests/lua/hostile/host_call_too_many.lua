-- expect: error at most 8
return strata.call("host_add", 1, 2, 3, 4, 5, 6, 7, 8, 9)
