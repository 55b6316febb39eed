// Numbers for the web app, measured in headless Chromium against a real
// `agwire serve` on loopback (AGWIRE_BIN, default target/release/agwire):
//
//   bundle   what the browser downloads, gzipped as agwire-web sends it
//   tti      navigation start → the composer is enabled (thread loaded), cold and warm cache
//   history  a 10,000-message thread (one day): history response end → the
//            list painted (its last rows in the DOM, next frame), and how many
//            rows the window put in the DOM; then frames while scrolling up
//   tokens   a fake provider streams N tokens at R/s through the service:
//            how long after the stream's last byte the last token is on screen
//
// Usage: node bench/bench.mjs [--quick]   (prints a Markdown table)

import { readFileSync, readdirSync } from "node:fs";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
process.env.AGWIRE_BIN ??= resolve(here, "../../target/release/agwire");
const { dataDir, fakeProvider, launch, serve } = await import("../e2e/harness.mjs");

const quick = process.argv.includes("--quick");
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (x) => `${x.toFixed(0)} ms`;
const rows = [];

// --- bundle ---
const dist = resolve(here, "../dist");
const assets = readdirSync(join(dist, "assets")).map((f) => join("assets", f));
let raw = 0;
let gz = 0;
for (const f of ["index.html", ...assets]) {
  const bytes = readFileSync(join(dist, f));
  raw += bytes.length;
  gz += gzipSync(bytes, { level: 9 }).length;
}
rows.push(["bundle (html + js + css)", `${(gz / 1024).toFixed(1)} KiB gzipped (${(raw / 1024).toFixed(0)} KiB raw)`]);

const browser = await launch();
async function page(base) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p = await context.newPage();
  // When the composer becomes usable: the app is interactive on its thread.
  await p.addInitScript(() => {
    const tick = () => {
      const box = document.getElementById("message");
      if (box && !box.disabled && !box.readOnly) window.__interactive = performance.now();
      else requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  return { context, page: p };
}

async function api(base, path, body) {
  const r = await fetch(base + path, body ? { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) } : {});
  return r.json();
}

// --- time to interactive ---
{
  const server = await serve({ dir: dataDir("bench-tti"), args: ["--builtin-token-delay-ms", "0"] });
  const cold = [];
  const warm = [];
  for (let i = 0; i < (quick ? 3 : 10); i++) {
    const { context, page: p } = await page(server.base);
    await p.goto(`${server.base}/`);
    await p.waitForFunction(() => window.__interactive !== undefined);
    cold.push(await p.evaluate(() => window.__interactive));
    await p.reload();
    await p.waitForFunction(() => window.__interactive !== undefined);
    warm.push(await p.evaluate(() => window.__interactive));
    await context.close();
  }
  rows.push(["time to interactive, cold cache (median)", ms(median(cold))]);
  rows.push(["time to interactive, warm cache (median)", ms(median(warm))]);
  await server.stop();
}

// --- a 10,000-message thread ---
{
  const server = await serve({ dir: dataDir("bench-history"), args: ["--builtin-token-delay-ms", "0"] });
  const threadId = crypto.randomUUID();
  const turns = 5000;
  const words = "Markdown with **bold**, `code` and a [link](https://example.com) in a longer sentence that wraps";
  for (let i = 0; i < turns; i++) {
    const runId = `h-${i}`;
    await api(server.base, "/api/v1/agent/runs", {
      threadId,
      runId,
      messages: [{ id: `${runId}-u`, role: "user", content: `${i}: ${words}` }],
      forwardedProps: { runtime_mode: "chat" },
    });
    for (;;) {
      const status = await api(server.base, `/api/v1/agent/runs/${runId}`);
      if (!["queued", "running"].includes(status.status)) break;
      await new Promise((r) => setTimeout(r, 2));
    }
  }
  const samples = [];
  const longest = [];
  let inDom = 0;
  let fetched = 0;
  for (let i = 0; i < (quick ? 2 : 5); i++) {
    const { context, page: p } = await page(server.base);
    await p.goto(`${server.base}/#/chat/${threadId}`);
    // The list is painted when the thread's last answer is on screen.
    await p.waitForFunction((last) => [...document.querySelectorAll("[data-testid=assistant-message]")].some((a) => a.textContent.includes(last)), `${turns - 1}: `, {
      timeout: 60_000,
      polling: "raf",
    });
    const drawn = await p.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(performance.now()))));
    inDom = await p.locator("[data-testid=user-message], [data-testid=assistant-message]").count();
    // Scrolling up 30 screens, one step a frame: the longest frame.
    longest.push(
      await p.evaluate(async () => {
        const el = document.querySelector(".scroller");
        let worst = 0;
        let last = performance.now();
        for (let i = 0; i < 30; i++) {
          el.scrollTop -= el.clientHeight;
          await new Promise((r) => requestAnimationFrame(r));
          const now = performance.now();
          worst = Math.max(worst, now - last);
          last = now;
        }
        return worst;
      }),
    );
    const history = await p.evaluate(
      () => performance.getEntriesByType("resource").find((e) => e.name.includes("/api/v1/agent/history"))?.responseEnd ?? 0,
    );
    fetched = await p.evaluate(() => performance.getEntriesByType("resource").find((e) => e.name.includes("/api/v1/agent/history"))?.duration ?? 0);
    samples.push(drawn - history);
    await context.close();
  }
  rows.push([
    `open a ${turns * 2}-message thread: history response → list painted (median)`,
    `${ms(median(samples))} (the history request itself: ${ms(fetched)}; ${inDom} message rows in the DOM)`,
  ]);
  rows.push([`scroll it up 30 screens, a screen a frame: longest frame (median)`, ms(median(longest))]);
  await server.stop();
}

// --- token rate ---
{
  const llm = await fakeProvider();
  const server = await serve({
    dir: dataDir("bench-tokens"),
    env: { AGWIRE_LLM_BASE_URL: llm.url, AGWIRE_LLM_API_KEY: "sk-fake", AGWIRE_LLM_MODEL: "fake-model" },
  });
  const { context, page: p } = await page(server.base);
  await p.goto(`${server.base}/`);
  await p.waitForFunction(() => window.__interactive !== undefined);
  for (const rate of quick ? [200, 2000] : [100, 500, 1000, 2000, 5000, 10000]) {
    const n = Math.min(rate * 3, 20_000);
    await p.getByTestId("new-thread").click();
    await p.locator("#message").fill(`stream ${n} tokens at ${rate}/s`);
    await p.evaluate((last) => {
      window.__shown = undefined;
      const done = () => {
        const answers = document.querySelectorAll("[data-testid=assistant-message]");
        const text = answers[answers.length - 1]?.textContent ?? "";
        if (text.includes(last)) window.__shown = performance.now();
        else requestAnimationFrame(done);
      };
      requestAnimationFrame(done);
    }, ` t${n} `.trim());
    await p.locator("#message").press("Enter");
    await p.waitForFunction(() => window.__shown !== undefined, null, { timeout: 120_000, polling: 100 });
    await p.waitForFunction(() => !document.querySelector("[data-testid=progress]"), null, { timeout: 60_000 });
    const { shown, streamEnd, streamStart } = await p.evaluate(() => {
      const events = performance.getEntriesByType("resource").filter((e) => e.name.includes("/events"));
      const last = events[events.length - 1];
      return { shown: window.__shown, streamEnd: last.responseEnd, streamStart: last.responseStart };
    });
    const seconds = (streamEnd - streamStart) / 1000;
    rows.push([
      `${n} tokens offered at ${rate}/s`,
      `arrived at ${(n / seconds).toFixed(0)}/s; last token on screen ${ms(Math.max(0, shown - streamEnd))} after the stream's last byte`,
    ]);
  }
  await context.close();
  await server.stop();
  await llm.close();
}

await browser.close();
const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
console.log(`| measure | result |\n| --- | --- |\n${rows.map(([a, b]) => `| ${a} | ${b} |`).join("\n")}\n\nload average at the end: ${load}; binary: ${process.env.AGWIRE_BIN}`);
