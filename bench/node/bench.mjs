// The official TypeScript SDK's side of the side-by-side benchmark.
//
// node bench/node/bench.mjs <workload.json> <sse-bytes-file> <proto-bytes-file> <client-events-limit>
// Prints one JSON object: {"sse_encode": {events, bytes, seconds}, ...}.
// Every measurement runs the same events agwire runs (the workload file is
// written by the Rust side), after one warm-up pass.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const req = createRequire(path.join(here, "../../interop/package.json"));
const { EventEncoder } = req("@ag-ui/encoder");
const proto = req("@ag-ui/proto");
const { AbstractAgent, parseSSEStream } = req("@ag-ui/client");
const { Observable, Subject } = req("rxjs");

console.warn = console.log = console.info = console.debug = console.error = () => {};
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const [workloadFile, sseFile, protoFile, clientLimitArg] = process.argv.slice(2);
const events = JSON.parse(readFileSync(workloadFile, "utf8"));
const sseBytes = new Uint8Array(readFileSync(sseFile));
const protoBytes = new Uint8Array(readFileSync(protoFile));
const clientLimit = Number(clientLimitArg);

function time(fn) {
  fn(); // warm-up: JIT and caches
  const start = process.hrtime.bigint();
  const out = fn();
  return { ...out, seconds: Number(process.hrtime.bigint() - start) / 1e9 };
}

const result = {};

result.sse_encode = time(() => {
  const encoder = new EventEncoder();
  let bytes = 0;
  for (const e of events) bytes += Buffer.byteLength(encoder.encode(e));
  return { events: events.length, bytes };
});

result.proto_encode = time(() => {
  let bytes = 0;
  for (const e of events) bytes += proto.encode(e).length + 4;
  return { events: events.length, bytes };
});

// The frames as @ag-ui/proto itself wrote them, so decode measures decoding only.
const frames = [];
for (let at = 0; at < protoBytes.length; ) {
  const len = new DataView(protoBytes.buffer, protoBytes.byteOffset + at, 4).getUint32(0, false);
  frames.push(protoBytes.subarray(at + 4, at + 4 + len));
  at += 4 + len;
}
result.proto_decode = time(() => {
  let n = 0;
  for (const f of frames) if (proto.decode(f)) n++;
  return { events: n, bytes: protoBytes.length };
});

// The reference client's whole consumer path: SSE parsing, compatibility
// boundary, enforcement, chunk expansion, verification, apply — fed the SSE
// body in 64 KiB chunks. Its apply stage copies the message list on every
// event, so cost grows with stream length: we measure a prefix of
// `clientLimit` events (the prefix ends at an event boundary; the run is left
// open, which the client tolerates).
class Replay extends AbstractAgent {
  constructor(body) {
    super({ threadId: "bench-thread" });
    this.body = body;
  }
  run() {
    const body = this.body;
    // parseSSEStream subscribes to its source at once: push the body only when
    // the agent has subscribed to the parsed side.
    return new Observable((sub) => {
      const http = new Subject();
      const inner = parseSSEStream(http).subscribe(sub);
      http.next({ type: "headers", status: 200, headers: new Headers({ "content-type": "text/event-stream" }) });
      for (let at = 0; at < body.length; at += 65536) http.next({ type: "data", data: body.subarray(at, at + 65536) });
      http.complete();
      return inner;
    });
  }
}
let prefixEnd = sseBytes.length;
let count = 0;
for (let i = 0; i + 1 < sseBytes.length; i++) {
  if (sseBytes[i] === 10 && sseBytes[i + 1] === 10) {
    count++;
    if (count === clientLimit) {
      prefixEnd = i + 2;
      break;
    }
  }
}
const prefix = sseBytes.subarray(0, prefixEnd);
let delivered = 0;
result.client_decode_verify_apply = await (async () => {
  const once = async () => {
    const agent = new Replay(prefix);
    delivered = 0;
    await agent.runAgent({ runId: "bench-run" }, { onEvent: () => void delivered++ });
    return agent;
  };
  await once();
  const start = process.hrtime.bigint();
  await once();
  return { events: delivered, bytes: prefix.length, seconds: Number(process.hrtime.bigint() - start) / 1e9 };
})();

emit(result);
