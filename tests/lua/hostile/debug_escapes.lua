-- expect: result nil	nil	nil	nil	nil	nil	nil	nil	nil	true
return debug.getregistry, debug.sethook, debug.getlocal, debug.setlocal, debug.setupvalue,
	debug.upvaluejoin, debug.setmetatable, debug.getinfo, debug.debug, debug.traceback ~= nil
