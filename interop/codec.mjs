// The official SDKs as judges of agwire-codec. One job per stdin line, one
// answer per stdout line, in order.
//
//   node interop/codec.mjs <mode>
//
// modes:
//   sse-encode     {"event"}                     -> {"sse": base64 of EventEncoder().encode(event)}
//   sse-parse      {"chunks": [base64...]}       -> {"events": [...]} via @ag-ui/client parseSSEStream
//   negotiate      {"accept"}                    -> {"contentType"} of new EventEncoder({accept})
//   proto-encode   {"event"}                     -> {"bytes": base64 of @ag-ui/proto encode(event)}
//   proto-decode   {"bytes": base64}             -> {"event"} via @ag-ui/proto decode
//   proto-parse    {"chunks": [base64...]}       -> {"events": [...]} via @ag-ui/client parseProtoStream
// Errors come back as {"error": message}.
import { createRequire } from "node:module";
import readline from "node:readline";

const require = createRequire(import.meta.url);
const { EventEncoder } = require("@ag-ui/encoder");
const proto = require("@ag-ui/proto");
const { parseSSEStream, parseProtoStream } = require("@ag-ui/client");
const { Subject } = require("rxjs");

console.warn = console.log = console.info = console.debug = console.error = () => {};
const b64 = (bytes) => Buffer.from(bytes).toString("base64");
const unb64 = (s) => new Uint8Array(Buffer.from(s, "base64"));

// The parsers subscribe to their source as soon as they are called, so the
// body is pushed only once the parsed side has a subscriber.
function collect(parse, chunks) {
  return new Promise((resolve) => {
    const events = [];
    const http = new Subject();
    parse(http).subscribe({
      next: (e) => events.push(e),
      error: (e) => resolve({ events, error: String(e?.message ?? e) }),
      complete: () => resolve({ events }),
    });
    http.next({ type: "headers", status: 200, headers: new Headers() });
    for (const c of chunks) http.next({ type: "data", data: unb64(c) });
    http.complete();
  });
}

const mode = process.argv[2];
const handlers = {
  "sse-encode": (job) => ({ sse: b64(Buffer.from(new EventEncoder().encode(job.event))) }),
  "sse-parse": (job) => collect(parseSSEStream, job.chunks),
  negotiate: (job) => ({ contentType: new EventEncoder({ accept: job.accept }).getContentType() }),
  "proto-encode": (job) => ({ bytes: b64(proto.encode(job.event)) }),
  "proto-decode": (job) => ({ event: proto.decode(unb64(job.bytes)) }),
  "proto-parse": (job) => collect(parseProtoStream, job.chunks),
};
const handle = handlers[mode];
if (!handle) {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = await handle(JSON.parse(line));
  } catch (e) {
    answer = { error: String(e?.message ?? e) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
