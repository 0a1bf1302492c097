-- expect: error attempt to call a nil value (global 'require')
return require("socket.core")
