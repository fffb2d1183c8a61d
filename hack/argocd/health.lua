-- What Argo CD shows for this kind, from its Ready condition and observedGeneration.
-- Runs in Argo CD's Lua sandbox (gopher-lua, no string library): plain comparisons and `..` only.
local waiting = @@WAITING@@

local function find(conditions, type)
  if conditions == nil then
    return nil
  end
  for _, condition in ipairs(conditions) do
    if condition.type == type then
      return condition
    end
  end
  return nil
end

local function describe(condition)
  local text = condition.reason or ""
  if condition.message ~= nil and condition.message ~= "" then
    text = text .. ": " .. condition.message
  end
  return text
end

local hs = {}
local generation = obj.metadata.generation
local status = obj.status
-- A new object reads status {observedGeneration: 0} (the CRD's default) until the operator looks.
if status == nil or status.observedGeneration == nil or status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the secretferry operator to reconcile this resource"
  return hs
end
if generation ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the secretferry operator to observe generation " .. generation
    .. " (status is for generation " .. status.observedGeneration .. ")"
  return hs
end
local ready = find(status.conditions, "Ready")
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the secretferry operator to reconcile this resource"
  return hs
end
if generation ~= nil and ready.observedGeneration ~= nil and ready.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the secretferry operator to observe generation " .. generation
  return hs
end
hs.message = describe(ready)
if ready.status == "True" then
  -- TemporaryPrivilege: granted, and its window has not started yet.
  local active = find(status.conditions, "Active")
  if active ~= nil and active.status == "False" and active.reason == "Pending" then
    hs.status = "Suspended"
    hs.message = describe(active)
    return hs
  end
  hs.status = "Healthy"
  return hs
end
if ready.status == "False" and not waiting[ready.reason] then
  hs.status = "Degraded"
  return hs
end
-- Unknown, or False while a referenced object may still come: retried by the operator.
hs.status = "Progressing"
return hs
