-- expect: result attempt to load a binary chunk (mode is 't')
return load(string.dump(function() return 1 end))
