-- expect: error no host function 'no_such_fn'
return strata.call("no_such_fn")
