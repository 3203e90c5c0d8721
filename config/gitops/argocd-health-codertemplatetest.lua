-- Argo CD health rule for CoderTemplateTest (coder.com/v1alpha1).
-- Install it under the argocd-cm key resource.customizations.health.coder.com_CoderTemplateTest.
-- Progressing while the controller has not yet seen the current spec or the run goes on, Healthy once the run
-- Succeeded with Ready=True, Degraded when it Failed. A test being deleted stays Progressing while the controller
-- deletes its workspace.
local hs = { status = "Progressing", message = "Waiting for the controller to start the test" }
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "Deleting the test workspace"
  return hs
end
local status = obj.status
if status == nil or status.observedGeneration == nil or obj.metadata == nil
    or status.observedGeneration ~= obj.metadata.generation then
  return hs
end
local ready = nil
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    if condition.type == "Ready" then
      ready = condition
    end
  end
end
if status.message ~= nil and status.message ~= "" then
  hs.message = status.message
end
if status.phase == "Succeeded" and ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
elseif status.phase == "Failed" then
  hs.status = "Degraded"
end
return hs
