// Replays event streams through the official @ag-ui/client pipeline
// (compatibility boundary → enforcement → chunk expansion → verification → apply)
// and reports what the reference client made of each.
//
// stdin:  one JSON object per line: {"id", "threadId", "events": [...],
//         "messages"?: [...], "state"?: any, "runId"?, "maxProtocolVersion"?}
// stdout: one JSON object per line: {"id", "ok", "error"?, "events": [...delivered],
//         "messages": [...], "state": any, "warnings": [...]}
import { AbstractAgent } from "@ag-ui/client";
import { from } from "rxjs";
import readline from "node:readline";

class ReplayAgent extends AbstractAgent {
  constructor(config, events, maxProtocolVersion) {
    super(config);
    this.events = events;
    this.pin = maxProtocolVersion;
  }

  get maxProtocolVersion() {
    return this.pin ?? super.maxProtocolVersion;
  }

  run() {
    // Events go out verbatim: the fixtures are deliberately malformed at times.
    return from(this.events.map((e) => structuredClone(e)));
  }
}

let warnings = [];
console.warn = (...args) => {
  warnings.push(args.map((a) => (typeof a === "string" ? a : String(a?.message ?? a))).join(" "));
};
// Debug chatter on console.log/info/debug would corrupt stdout.
console.log = console.info = console.debug = console.error = () => {};
const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  const job = JSON.parse(line);
  warnings = [];
  const delivered = [];
  const agent = new ReplayAgent(
    {
      threadId: job.threadId,
      initialMessages: job.messages ?? [],
      initialState: job.state ?? {},
    },
    job.events,
    job.maxProtocolVersion,
  );
  let ok = true;
  let error;
  try {
    await agent.runAgent(
      { runId: job.runId ?? "replay-run", ...(job.parameters ?? {}) },
      { onEvent: ({ event }) => void delivered.push(structuredClone(event)) },
    );
  } catch (e) {
    ok = false;
    error = String(e?.message ?? e);
  }
  out({
    id: job.id,
    ok,
    ...(error !== undefined && { error }),
    events: delivered,
    messages: agent.messages,
    state: agent.state === undefined ? null : agent.state,
    warnings,
  });
}
