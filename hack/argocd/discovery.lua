-- The actions Argo CD offers for this kind.
local actions = {}
actions["refresh"] = {["disabled"] = false}
return actions
