-- expect: error attempt to index a nil value (global 'io')
return io.open("/etc/passwd")
