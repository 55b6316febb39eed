// The node reference producer: a plain `http` server writing events with the
// official @ag-ui/encoder, which answers protobuf when Accept admits it and
// SSE otherwise. Same routes and deterministic content as python/server.py.
//
// Usage: node encoder-server.mjs --port 0   (prints "listening <port>" once bound)
import http from "node:http";
import { once } from "node:events";
import { EventEncoder } from "@ag-ui/encoder";

const WORDS = ["The ", "quick ", "agent ", "streams ", "tokens ", "to ", "the ", "user ", "café ", "done. "];

const started = (i) => ({ type: "RUN_STARTED", threadId: i.threadId, runId: i.runId });
const finished = (i) => ({ type: "RUN_FINISHED", threadId: i.threadId, runId: i.runId });
function* text(messageId, deltas) {
  yield { type: "TEXT_MESSAGE_START", messageId, role: "assistant" };
  for (const delta of deltas) yield { type: "TEXT_MESSAGE_CONTENT", messageId, delta };
  yield { type: "TEXT_MESSAGE_END", messageId };
}
const pieces = (s, n) => Array.from({ length: Math.ceil(s.length / n) }, (_, k) => s.slice(k * n, k * n + n));
const lastUserText = (i) => {
  const m = [...(i.messages ?? [])].reverse().find((m) => m.role === "user");
  return typeof m?.content === "string" ? m.content : "";
};

// Each route yields the events of one run for input `i` (and the URL's query).
const routes = {
  "/agentic_chat": function* (i) {
    yield started(i);
    yield* text(`${i.runId}-msg-1`, pieces(`Hello! You said: ${lastUserText(i)}`, 6));
    yield finished(i);
  },
  "/chunks": function* (i) {
    const id = i.runId;
    yield started(i);
    yield { type: "TEXT_MESSAGE_CHUNK", messageId: `${id}-msg-1`, role: "assistant", delta: "Let me " };
    yield { type: "TEXT_MESSAGE_CHUNK", messageId: `${id}-msg-1`, delta: "check." };
    yield {
      type: "TOOL_CALL_CHUNK",
      toolCallId: `${id}-call-1`,
      toolCallName: "lookup",
      parentMessageId: `${id}-msg-1`,
      delta: '{"query":',
    };
    yield { type: "TOOL_CALL_CHUNK", toolCallId: `${id}-call-1`, delta: '"weather"}' };
    yield finished(i);
  },
  "/tool_call": function* (i) {
    const toolCallId = `${i.runId}-call-1`;
    yield started(i);
    yield { type: "TOOL_CALL_START", toolCallId, toolCallName: "change_background" };
    for (const delta of pieces('{"background":"red"}', 5)) yield { type: "TOOL_CALL_ARGS", toolCallId, delta };
    yield { type: "TOOL_CALL_END", toolCallId };
    yield finished(i);
  },
  "/shared_state": function* (i) {
    const state = i.state && typeof i.state === "object" && !Array.isArray(i.state) ? i.state : {};
    yield started(i);
    yield { type: "STATE_SNAPSHOT", snapshot: { ...state, count: 1, items: ["a"] } };
    yield {
      type: "STATE_DELTA",
      delta: [
        { op: "replace", path: "/count", value: 2 },
        { op: "add", path: "/items/-", value: "b" },
      ],
    };
    yield finished(i);
  },
  "/steps": function* (i) {
    yield started(i);
    yield { type: "STEP_STARTED", stepName: "plan" };
    yield* text(`${i.runId}-msg-1`, ["Planning ", "done."]);
    yield { type: "STEP_FINISHED", stepName: "plan" };
    yield finished(i);
  },
  "/short": function* (i) {
    yield started(i);
    yield* text(`${i.runId}-msg-1`, ["Hello from node."]);
    yield finished(i);
  },
  "/long": function* (i, query) {
    const n = Number(query.get("n") ?? 100000);
    const messageId = `${i.runId}-msg-1`;
    yield started(i);
    yield { type: "TEXT_MESSAGE_START", messageId, role: "assistant" };
    for (let k = 0; k < n; k++) yield { type: "TEXT_MESSAGE_CONTENT", messageId, delta: WORDS[k % 10] };
    yield { type: "TEXT_MESSAGE_END", messageId };
    yield finished(i);
  },
};

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://localhost");
  const route = routes[url.pathname];
  const idle = url.pathname === "/idle";
  if (req.method !== "POST" || (!route && !idle)) {
    res.writeHead(404).end();
    return;
  }
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  let input;
  try {
    input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    res.writeHead(400, { "Content-Type": "application/json" }).end('{"detail":"invalid JSON"}');
    return;
  }
  const encoder = new EventEncoder({ accept: req.headers.accept });
  res.writeHead(200, { "Content-Type": encoder.getContentType(), "Cache-Control": "no-cache" });
  if (idle) {
    res.write(encoder.encodeBinary(started(input)));
    return; // stays open until the client leaves
  }
  for (const event of route(input, url.searchParams)) {
    if (!res.write(encoder.encodeBinary(event))) await once(res, "drain");
  }
  res.end();
});

const portArg = process.argv.indexOf("--port");
const port = portArg >= 0 ? Number(process.argv[portArg + 1]) : 8001;
server.listen(port, "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
