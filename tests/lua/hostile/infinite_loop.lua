-- timeout: 1s
-- expect: timeout
while true do end
