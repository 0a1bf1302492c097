-- expect: result done
collectgarbage("stop") for i = 1, 1e5 do local x = {i} end return "done"
