-- expect: error pattern too complex
return string.find(string.rep("a", 5000), string.rep("a?", 5000) .. string.rep("a", 5000))
