-- expect: error invalid conversion
return string.format("%99999d", 1)
