// What the browser tests run against: real `agwire serve` processes, a
// TCP proxy in front of one (so a test can cut every connection mid-run),
// an OpenAI-compatible fake provider that speaks chat-completions SSE
// chunks, Debian's Chromium driven by playwright-core, and page helpers
// that collect console errors.

import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { existsSync, mkdtempSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { connect, createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(here, "../..");
export const OUT = process.env.AGWIRE_WEB_OUT ?? join(here, "out");
mkdirSync(OUT, { recursive: true });

export const AGWIRE_BIN = process.env.AGWIRE_BIN ?? join(REPO, "target/debug/agwire");
export const CHROMIUM = process.env.AGWIRE_CHROMIUM ?? "/usr/bin/chromium";
/**
 * A built app to serve instead of the one the binary embeds (agwire-web
 * embeds web/dist when it is compiled): testing a change to web/ then needs
 * no rebuild of the binary. Unset: the binary's own app, as users get it.
 */
export const WEB_DIST = process.env.AGWIRE_WEB_DIST ? resolve(process.env.AGWIRE_WEB_DIST) : null;

/** The flags every launch uses (playwright adds a fresh --user-data-dir). */
export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * libfaketime (Debian's faketime package), preloaded straight into the
 * process: the `faketime` wrapper forks, and killing it would leave the
 * service running.
 */
export function libfaketime() {
  const roots = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"];
  for (const root of roots) {
    const path = join(root, "faketime", "libfaketimeMT.so.1");
    if (existsSync(path)) return path;
  }
  throw new Error("libfaketime is missing (apt-get install faketime)");
}

/** Environment that sets the clock of a process `minutes` in the past. */
export function clockBack(minutes) {
  return { LD_PRELOAD: libfaketime(), FAKETIME: `-${minutes}m`, FAKETIME_DONT_FAKE_MONOTONIC: "1", FAKETIME_NO_CACHE: "1" };
}

/** Environment that sets the clock of a process `minutes` ahead (a server whose clock runs ahead of the browser's). */
export function clockAhead(minutes) {
  return { ...clockBack(0), FAKETIME: `+${minutes}m` };
}

const children = new Set();
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

export function dataDir(name) {
  return mkdtempSync(join(tmpdir(), `agwire-web-${name}-`));
}

/**
 * Starts `agwire serve` on a free loopback port; resolves once it prints
 * `listening <url>`. `config`: TOML text, written into the data dir and
 * passed with `--config`.
 */
export async function serve({ dir, args = [], env = {}, config }) {
  if (config !== undefined) {
    const file = join(dir, "agwire.toml");
    writeFileSync(file, config);
    args = ["--config", file, ...args];
  }
  const command = [AGWIRE_BIN, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, ...args];
  const inherited = { ...process.env };
  for (const key of Object.keys(inherited)) if (key.startsWith("AGWIRE_") && key !== "AGWIRE_BIN") delete inherited[key];
  const child = spawn(command[0], command.slice(1), {
    env: { ...inherited, RUST_LOG: "warn", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  const exited = new Promise((resolveExit) => child.once("exit", resolveExit));
  const lines = createInterface({ input: child.stdout });
  const base = await new Promise((resolveBase, reject) => {
    const timer = setTimeout(() => reject(new Error(`agwire serve did not start: ${command.join(" ")}`)), 20_000);
    lines.once("line", (line) => {
      clearTimeout(timer);
      const url = line.trim().replace(/^listening /, "");
      if (!url.startsWith("http://")) reject(new Error(`unexpected first line: ${line}`));
      else resolveBase(url);
    });
    child.once("exit", (code) => reject(new Error(`agwire serve exited (${code}) before listening`)));
  });
  const front = WEB_DIST ? await distFront(base, WEB_DIST) : null;
  return {
    base: front?.base ?? base,
    child,
    async stop() {
      await front?.close();
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".png": "image/png" };

/**
 * An HTTP server that answers GETs of the app's files from `dist` (with the
 * security headers the binary sends with its own app, CSP included) and
 * passes every other request to `target` as it comes, streams included; a
 * client that goes away takes its upstream request with it.
 */
async function distFront(target, dist) {
  const page = await fetch(`${target}/`);
  const security = {};
  for (const name of ["content-security-policy", "x-content-type-options", "referrer-policy"]) {
    const value = page.headers.get(name);
    if (value) security[name] = value;
  }
  const { hostname, port } = new URL(target);
  const sockets = new Set();
  const server = createHttpServer((req, res) => {
    const path = new URL(req.url, "http://x").pathname;
    if ((req.method === "GET" || req.method === "HEAD") && !path.startsWith("/api/") && path !== "/healthz") {
      const file = join(dist, path === "/" ? "index.html" : path);
      if (file.startsWith(dist) && existsSync(file) && statSync(file).isFile()) {
        const body = readFileSync(file);
        const type = TYPES[file.slice(file.lastIndexOf("."))] ?? "application/octet-stream";
        res.writeHead(200, { ...security, "content-type": type, "cache-control": "no-cache", "content-length": body.length });
        res.end(req.method === "HEAD" ? undefined : body);
        return;
      }
    }
    const upstream = httpRequest({ hostname, port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      res.flushHeaders();
      answer.pipe(res);
    });
    upstream.on("error", () => res.destroy());
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((r) => server.close(r));
    },
  };
}

/**
 * A TCP proxy to `target` that remembers every request head it forwards
 * and can cut all open connections at once (a network drop).
 */
export async function proxy(target) {
  const { hostname, port } = new URL(target);
  const sockets = new Set();
  const heads = [];
  const server = createTcpServer((client) => {
    const upstream = connect(Number(port), hostname);
    sockets.add(client);
    sockets.add(upstream);
    // Request heads, one per request on this (keep-alive) connection: a
    // head ends at a blank line, and its Content-Length bytes of body follow.
    let buffer = "";
    let skip = 0;
    client.on("data", (chunk) => {
      buffer += chunk.toString("latin1");
      for (;;) {
        if (skip > 0) {
          const n = Math.min(skip, buffer.length);
          buffer = buffer.slice(n);
          skip -= n;
          if (skip > 0) return;
        }
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.slice(0, end);
        heads.push(head);
        skip = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        buffer = buffer.slice(end + 4);
      }
    });
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", close);
    upstream.on("error", close);
    client.on("close", close);
    upstream.on("close", close);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    heads,
    /** Destroys every open connection, both ways. */
    cut() {
      const n = sockets.size;
      for (const s of sockets) s.destroy();
      sockets.clear();
      return n;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

/** An HS256 JWT (what `--jwt-secret` checks). */
export function jwt(secret, claims) {
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const body = `${b64({ alg: "HS256", typ: "JWT" })}.${b64(claims)}`;
  return `${body}.${createHmac("sha256", secret).update(body).digest("base64url")}`;
}

/** One chat-completions SSE chunk. */
function chunk(delta, finish = null) {
  return `data: ${JSON.stringify({
    id: "chatcmpl-fake",
    object: "chat.completion.chunk",
    created: 1,
    model: "fake-model",
    choices: [{ index: 0, delta, finish_reason: finish }],
  })}\n\n`;
}

const USAGE = `data: ${JSON.stringify({
  id: "chatcmpl-fake",
  object: "chat.completion.chunk",
  created: 1,
  model: "fake-model",
  choices: [],
  usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 },
})}\n\ndata: [DONE]\n\n`;

const textOf = (content) =>
  typeof content === "string" ? content : Array.isArray(content) ? content.filter((p) => p.type === "text").map((p) => p.text).join(" ") : "";

/** Text in pieces of a few characters, as a model streams it. */
function textChunks(text) {
  const parts = text.match(/.{1,6}/gs) ?? [];
  return parts.map((p) => chunk({ content: p })).join("") + chunk({}, "stop");
}

function toolCall(id, name, args) {
  const json = JSON.stringify(args);
  const half = Math.floor(json.length / 2);
  return (
    chunk({ tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: "" } }] }) +
    chunk({ tool_calls: [{ index: 0, function: { arguments: json.slice(0, half) } }] }) +
    chunk({ tool_calls: [{ index: 0, function: { arguments: json.slice(half) } }] }) +
    chunk({}, "tool_calls")
  );
}

/** The card the fake model asks `render_ui` for: every UiSchema node type. */
export const EVERY_NODE_HINT = {
  status: "success",
  title: "Every node",
  badge: "ALL",
  body: "A card with each kind of node.",
  fields: { Stack: "vertical and horizontal", Text: "five roles" },
  image: "/favicon.svg",
  blocks: [
    { type: "divider" },
    { type: "text", content: "A subtitle", role: "subtitle" },
    { type: "text", content: "A caption", role: "caption" },
    { type: "text", content: "let x = 1;", role: "code" },
    {
      type: "stack",
      direction: "horizontal",
      gap: "md",
      children: [
        { type: "badge", label: "info", status: "info" },
        { type: "badge", label: "warning", status: "warning" },
        { type: "badge", label: "error", status: "error" },
        { type: "badge", label: "pending", status: "pending" },
      ],
    },
    { type: "list", ordered: true, items: ["first", { type: "text", content: "second" }] },
    { type: "list", items: ["a bullet"] },
    { type: "kv", items: [{ label: "Key", value: "Value" }] },
    { type: "image", url: "javascript:alert(1)", alt: "refused" },
  ],
  actions: [
    { label: "Say thanks", variant: "primary", action: { type: "message", text: "thanks for the card" } },
    { label: "Docs", action: { type: "link", url: "https://example.com/docs" } },
    { label: "Go dark", variant: "danger", action: { type: "tool", name: "set_theme", args: { theme: "dark" } } },
  ],
};

/**
 * An OpenAI-compatible provider that answers by what the last user message
 * asks for. It records every request body.
 */
export async function fakeProvider() {
  const requests = [];
  /** Set by a test to stream a long answer at a given rate (bench). */
  const server = createHttpServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", async () => {
      const body = JSON.parse(raw || "{}");
      requests.push(body);
      const messages = body.messages ?? [];
      const last = messages[messages.length - 1] ?? {};
      const lastUser = [...messages].reverse().find((m) => m.role === "user");
      const said = textOf(lastUser?.content ?? "");
      if (said.includes("fail please") && !body.response_format) {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "the fake model refuses this prompt", type: "invalid_request_error" } }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      let out;
      if (body.response_format) {
        out = chunk({ content: JSON.stringify({ agent: "general" }) }, "stop");
      } else if (last.role === "tool") {
        const call = messages.flatMap((m) => m.tool_calls ?? []).find((c) => c.id === last.tool_call_id);
        out = textChunks(
          call?.function?.name === "render_ui"
            ? "Here is every kind of node."
            : call?.function?.name === "get_current_time"
              ? `It is ${JSON.parse(last.content).now}.`
              : "Done.",
        );
      } else if (/^(Approved|Denied)\./.test(said)) {
        const answer = [...messages].reverse().find((m) => m.role === "tool");
        const approved = answer ? JSON.parse(answer.content).approved === true : false;
        out = textChunks(approved ? "Booked, since you approved." : "Not booked: you said no.");
      } else if (said.includes("every node")) {
        out =
          chunk({ reasoning_content: "The user wants a card " }) +
          chunk({ reasoning_content: "with every node type." }) +
          toolCall("call_ui", "render_ui", EVERY_NODE_HINT);
      } else if (said.includes("what time")) {
        out = toolCall("call_time", "get_current_time", {});
      } else if (said.includes("book a table")) {
        out = toolCall("call_book", "confirm_action", { question: "Book a table for two at 19:00?", details: "Chez Nous, tonight" });
      } else if (/^stream (\d+) tokens at (\d+)\/s/.test(said)) {
        const [, n, rate] = said.match(/^stream (\d+) tokens at (\d+)\/s/);
        await streamTokens(res, Number(n), Number(rate));
        return;
      } else {
        out = textChunks(`Echo: ${said}`);
      }
      res.end(out + USAGE);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
    close: () => new Promise((r) => server.close(r)),
  };
}

/** `n` tokens ("t1 t2 …") at `rate` per second, in 10 ms batches. */
async function streamTokens(res, n, rate) {
  const start = performance.now();
  let sent = 0;
  while (sent < n) {
    const due = Math.min(n, Math.floor(((performance.now() - start) / 1000) * rate) + 1);
    let batch = "";
    for (; sent < due; sent++) batch += chunk({ content: `t${sent + 1} ` });
    if (batch) res.write(batch);
    await new Promise((r) => setTimeout(r, 10));
  }
  res.end(chunk({}, "stop") + USAGE);
}

export async function launch() {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS });
}

/**
 * A page whose console errors and uncaught exceptions are collected;
 * `clean(allowed)` returns those no pattern in `allowed` explains.
 */
export async function openPage(browser, options = {}) {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 800 },
    timezoneId: "America/Los_Angeles",
    locale: "en-US",
    ...options,
  });
  const page = await context.newPage();
  const problems = [];
  page.on("console", (m) => {
    if (m.type() !== "error" && m.type() !== "warning") return;
    const where = m.text().startsWith("Failed to load resource") ? ` (${m.location().url})` : "";
    problems.push(`console.${m.type()}: ${m.text()}${where}`);
  });
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("dialog", (d) => {
    problems.push(`dialog: ${d.message()}`);
    void d.dismiss();
  });
  return {
    page,
    context,
    problems,
    unexplained(allowed = []) {
      return problems.filter((p) => !allowed.some((re) => re.test(p)));
    },
  };
}

/** Waits until no run is going (the progress line is gone). */
export async function idle(page, timeout = 20_000) {
  await page.waitForFunction(() => !document.querySelector("[data-testid=progress]") && !document.querySelector("button[aria-label='Stop the run']"), null, {
    timeout,
  });
}

/** Types `text` in the composer and sends it with Enter. */
export async function say(page, text) {
  await page.locator("#message").fill(text);
  await page.locator("#message").press("Enter");
}
