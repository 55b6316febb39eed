-- wrk script for `agwire serve`: every request accepts a new run on a new
-- thread (run ids are unique per wrk thread), so the number measured is
-- accepted runs/s with the runs executing in the background.
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
  local body = '{"threadId":"' .. thread .. '","runId":"w' .. tostring(tid) .. '-' .. n .. '-' .. hex(8) ..
    '","messages":[{"id":"u","role":"user","content":"hello"}],"forwardedProps":{"runtime_mode":"chat"}}'
  return wrk.format("POST", "/api/v1/agent/runs", {["Content-Type"] = "application/json"}, body)
end
