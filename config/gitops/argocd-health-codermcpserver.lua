-- Argo CD health rule for CoderMCPServer (coder.com/v1alpha1).
-- Install it under the argocd-cm key resource.customizations.health.coder.com_CoderMCPServer.
-- Progressing while the controller has not yet seen the current spec or still works on it, Healthy once the config
-- in Coder matches the spec (Ready=True), Degraded when the object is Stalled (a person must act: the Ready
-- condition's reason says why). An object being deleted stays Progressing while the controller deletes its config.
local hs = { status = "Progressing", message = "Waiting for the controller to sync the MCP server config" }
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "Deleting the MCP server config in Coder"
  return hs
end
local status = obj.status
if status == nil or status.observedGeneration == nil or obj.metadata == nil
    or status.observedGeneration ~= obj.metadata.generation then
  return hs
end
local ready = nil
local stalled = nil
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    if condition.type == "Ready" then
      ready = condition
    elseif condition.type == "Stalled" then
      stalled = condition
    end
  end
end
if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
  hs.message = ready.reason .. ": " .. ready.message
end
if status.phase == "Ready" and ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
elseif status.phase == "Stalled" or (stalled ~= nil and stalled.status == "True") then
  hs.status = "Degraded"
end
return hs
