-- expect: error attempt to call a nil value (field 'exit')
os.exit(1)
