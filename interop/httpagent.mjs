// Drives the official HttpAgent (@ag-ui/client) against an AG-UI endpoint, run
// after run on one agent, exactly as a front end would.
//
// stdin:  {url, format: "sse"|"proto", threadId?, state?,
//          runs: [{runId?, messages?, state?, tools?, context?, forwardedProps?, resume?}]}
//         `messages` of a run are ADDED to the agent (addMessages) before it;
//         `state` replaces the agent's state before it; `answerToolCalls`
//         (a string) answers every tool call of the agent's messages that no
//         tool message answers yet, as a front end running its tools would.
// stdout: {contentTypes: [...one per HTTP response...],
//          runs: [{events, result, newMessages, messages, state, pendingInterrupts,
//                  logs: [{level, text}], error}]}
// "proto" forces `Accept: application/vnd.ag-ui.event+proto` through the fetch
// hook (HttpAgent spreads its own Accept after user headers, so a header
// option cannot); contentTypes proves which format the server answered with.
import { HttpAgent } from "@ag-ui/client";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const spec = JSON.parse(Buffer.concat(chunks).toString("utf8"));

// Everything the SDK says (verification/enforcement warnings, version
// warnings, failures) goes through console; keep it per run.
const logs = [];
for (const level of ["log", "info", "warn", "error", "debug"]) {
  console[level] = (...args) =>
    logs.push({
      level,
      text: args
        .map((a) => (typeof a === "string" ? a : a instanceof Error ? a.message : JSON.stringify(a)))
        .join(" "),
    });
}

const accept = spec.format === "proto" ? "application/vnd.ag-ui.event+proto" : "text/event-stream";
const contentTypes = [];
const agent = new HttpAgent({
  url: spec.url,
  threadId: spec.threadId,
  initialState: spec.state ?? {},
  fetch: async (url, init) => {
    const response = await fetch(url, { ...init, headers: { ...init.headers, Accept: accept } });
    contentTypes.push(response.headers.get("content-type"));
    return response;
  },
});

const runs = [];
for (const run of spec.runs) {
  if (run.messages?.length) agent.addMessages(run.messages);
  if (typeof run.answerToolCalls === "string") {
    const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
    for (const m of [...agent.messages]) {
      for (const call of m.role === "assistant" ? m.toolCalls ?? [] : []) {
        if (!answered.has(call.id)) {
          agent.addMessage({ id: `answer-${call.id}`, role: "tool", toolCallId: call.id, content: run.answerToolCalls });
        }
      }
    }
  }
  if (run.state != null) agent.setState(run.state);
  const events = [];
  const before = logs.length;
  let error = null;
  let result = null;
  let newMessages = [];
  try {
    const out = await agent.runAgent(
      {
        runId: run.runId ?? undefined,
        tools: run.tools ?? undefined,
        context: run.context ?? undefined,
        forwardedProps: run.forwardedProps ?? undefined,
        resume: run.resume ?? undefined,
      },
      { onEvent: ({ event }) => void events.push(event) },
    );
    result = out.result ?? null;
    newMessages = out.newMessages;
  } catch (e) {
    error = String(e?.message ?? e);
  }
  runs.push({
    events,
    result,
    newMessages,
    messages: agent.messages,
    state: agent.state,
    pendingInterrupts: agent.pendingInterrupts ?? [],
    logs: logs.slice(before),
    error,
  });
}
process.stdout.write(JSON.stringify({ contentTypes, runs }));
