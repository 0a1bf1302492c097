-- expect: error the arguments do not match the signature of host function 'host_add'
return strata.call("host_add", "x", 2)
