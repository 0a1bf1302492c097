-- expect: error number has no integer representation
return strata.call("host_add", 1.5, 2)
