-- expect: error integer or string expected, got table
return strata.call("host_add", {}, 2)
