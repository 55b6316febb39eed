-- wrk script for `agwire serve`, end to end: every request posts a new run
-- on a new thread with `Accept: text/event-stream`, and the response is the
-- run's whole AG-UI stream (wrk reads it to its end), so requests/s is
-- completed runs/s.
local n = 0
local tid = 0
setup = function(thread)
  tid = tid + 1
  thread:set("tid", tid)
end
local function hex(k)
  local s = {}
  for i = 1, k do s[i] = string.format("%x", math.random(0, 15)) end
  return table.concat(s)
end
request = function()
  n = n + 1
  local thread = hex(8) .. "-" .. hex(4) .. "-4" .. hex(3) .. "-a" .. hex(3) .. "-" .. hex(12)
  local body = '{"threadId":"' .. thread .. '","runId":"s' .. tostring(tid) .. '-' .. n .. '-' .. hex(8) ..
    '","messages":[{"id":"u","role":"user","content":"hello there"}],"forwardedProps":{"runtime_mode":"chat"}}'
  return wrk.format("POST", "/api/v1/agent/runs",
    {["Content-Type"] = "application/json", ["Accept"] = "text/event-stream"}, body)
end
