-- expect: result nil
return load("return _G", "x", "t", {})()
