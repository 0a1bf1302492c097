-- expect: timeout
while true do end
