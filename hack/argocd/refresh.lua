-- "refresh": a new value of @@ANNOTATION@@ makes the operator read the service now
-- (and for a ClusterSecretSync, in every namespace it selects). Any new value does; the time is one.
local os = require("os")
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["@@ANNOTATION@@"] = os.date("!%Y-%m-%dT%H:%M:%SZ")
return obj
