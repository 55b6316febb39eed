-- wrk script for `agwire serve`: every request posts a new run on a thread
-- of its own. With AGWIRE_BENCH_STREAM=1 it asks for the run's stream
-- (Accept: text/event-stream) and wrk reads the whole AG-UI stream, so
-- requests/s is completed runs/s; without it the answer is the 202 and the
-- runs execute in the background (accepted runs/s).
--
-- Ids never repeat: wrk does not seed math.random, so each wrk thread takes
-- a prefix from /dev/urandom and counts from there.
local stream = os.getenv("AGWIRE_BENCH_STREAM") == "1"
local prefix, group, n
-- AGWIRE_BENCH_TOKENS: a file of bearer tokens, one per line (one per
-- user), taken in turn.
local tokens = {}
local tokens_file = os.getenv("AGWIRE_BENCH_TOKENS")
if tokens_file then
  for line in io.lines(tokens_file) do
    tokens[#tokens + 1] = line
  end
end

init = function(args)
  local urandom = assert(io.open("/dev/urandom", "rb"))
  local bytes = urandom:read(6)
  urandom:close()
  prefix = string.format("%02x%02x%02x%02x", bytes:byte(1, 4))
  group = string.format("%02x%02x", bytes:byte(5, 6))
  n = 0
end

request = function()
  n = n + 1
  local thread = prefix .. "-" .. group .. "-4000-a000-" .. string.format("%012x", n)
  local body = '{"threadId":"' .. thread .. '","runId":"r' .. prefix .. group .. '-' .. n ..
    '","messages":[{"id":"u","role":"user","content":"hello there"}],"forwardedProps":{"runtime_mode":"chat"}}'
  local headers = {["Content-Type"] = "application/json"}
  if stream then
    headers["Accept"] = "text/event-stream"
  end
  if #tokens > 0 then
    headers["Authorization"] = "Bearer " .. tokens[(n % #tokens) + 1]
  end
  return wrk.format("POST", "/api/v1/agent/runs", headers, body)
end
