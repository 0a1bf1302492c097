-- expect: result nil	nil	nil	nil	nil	nil	nil	nil	nil	nil	nil	nil
return io, os.execute, os.exit, os.remove, os.rename, os.getenv, os.tmpname, os.setlocale, package, require, dofile, loadfile
