-- Argo CD health check for tabjob.dev/TabularJob (resource.customizations.health.tabjob.dev_TabularJob).
-- Argo CD runs it in a sandboxed Lua 5.1 with the live object as `obj`; it returns {status, message}.
-- A finished job is Healthy only when it Succeeded; a failed or stalled one is Degraded (so an Application does
-- not report Healthy for a run that produced no model); anything on its way is Progressing.
-- tests/unit/test_argocd_health.py runs this file against sample statuses.

local hs = {status = "Progressing", message = "Waiting for the tabjob operator"}

local function condition(status, ctype)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == ctype then
      return c
    end
  end
  return nil
end

-- The first non-empty argument. Not ipairs({...}): it stops at the first nil, and nils are what this skips.
local function first_message(...)
  for i = 1, select("#", ...) do
    local m = select(i, ...)
    if m ~= nil and m ~= "" then
      return m
    end
  end
  return ""
end

local status = obj.status
if status == nil then
  return hs
end

-- The status describes an older spec until the operator has seen the current generation (kstatus' rule).
local generation = obj.metadata and obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local phase = status.phase
local stalled = condition(status, "Stalled")
local failed = condition(status, "Failed")

if phase == "Failed" or (failed ~= nil and failed.status == "True") then
  hs.status = "Degraded"
  hs.message = first_message(failed and failed.message, status.message, status.lastFailure, "The job failed")
  return hs
end

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = first_message(stalled.message, status.message, "The job is stalled")
  return hs
end

if phase == "Succeeded" then
  hs.status = "Healthy"
  if status.bestModel ~= nil and status.score ~= nil then
    hs.message = "Succeeded: best model " .. status.bestModel .. ", score " .. tostring(status.score)
  else
    hs.message = first_message(status.message, "Succeeded")
  end
  return hs
end

if phase == "Suspended" then
  hs.status = "Suspended"
  hs.message = first_message(status.message, "Suspended (spec.runPolicy.suspend)")
  return hs
end

if phase == "Running" then
  local summary = status.progress and status.progress.summary
  if summary ~= nil and summary ~= "" then
    hs.message = "Running: " .. summary .. " fits done"
  else
    hs.message = first_message(status.message, "Running")
  end
  return hs
end

-- Pending, or a phase this check does not know yet: progressing, with whatever the operator says.
hs.message = first_message(status.message, phase, "Waiting for the tabjob operator")
return hs
