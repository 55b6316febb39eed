// The web app in headless Chromium against real `agwire serve` processes:
//
// - `local`: the scripted model (40 ms between pieces), behind a TCP proxy
//   that can cut every connection; its data dir first holds yesterday's
//   turns and an automation job, written by the same binary under faketime.
// - `provider`: an OpenAI-compatible fake provider (reasoning, render_ui
//   with every node type, a backend tool, a frontend tool, an error).
// - `secured`: `--jwt-secret`, so the app has to ask for a token.
// - `expiring` and `skewed`: approvals expire after 2 s (`[runs]
//   pending_tool_call_ttl`); `skewed`'s clock runs 10 minutes ahead of the
//   browser's, so its expiry comes before the app's timer does.
//
// Every page's console errors and uncaught exceptions fail the test that
// opened it, except the browser's own lines for responses a test provokes.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { EVERY_NODE_HINT, OUT, clockAhead, clockBack, dataDir, fakeProvider, idle, jwt, launch, openPage, proxy, say, serve } from "./harness.mjs";

const WORDS =
  "apple banana cherry damson elder fig grape hazel iris juniper kiwi lemon mango nutmeg olive peach quince rowan sage tansy ugli vanilla walnut yarrow zucchini";
const LONG = `${WORDS} ${WORDS}`;
const SECRET = "browser-test-secret";
/** Approvals that expire before a test is over. */
const SHORT_TTL = '[runs]\npending_tool_call_ttl = "2s"\n';
/** axe-core, run in the page through the DevTools protocol (the page's CSP allows no inline script). */
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

let browser;
let local;
let front;
let provider;
let llm;
let secured;
let expiring;
let skewed;
let seeded;
const pages = [];

async function api(base, path, init = {}) {
  const response = await fetch(base + path, {
    ...init,
    headers: { "content-type": "application/json", ...(init.headers ?? {}) },
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function waitRun(base, runId, headers = {}) {
  for (let i = 0; i < 200; i++) {
    const { body } = await api(base, `/api/v1/agent/runs/${runId}`, { headers });
    if (body && !["queued", "running"].includes(body.status)) return body;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`run ${runId} did not finish`);
}

/** `agwire serve` on this data dir with its clock `minutes` in the past. */
function past(dir, minutes) {
  return serve({ dir, env: clockBack(minutes) });
}

/**
 * A day ago: an every-minute job whose tick fires once (then paused), and
 * a chat turn after it — written by the real binary under faketime.
 */
async function seed(dir) {
  const first = await past(dir, 24 * 60 + 10);
  const job = await api(first.base, "/api/v1/automation/jobs", {
    method: "POST",
    body: JSON.stringify({ name: "Minute check", schedule: { cron: "* * * * *" }, timezone: "UTC", prompt: "status report please" }),
  });
  assert.equal(job.status, 201, JSON.stringify(job.body));
  await first.stop();
  // Five minutes later (still a day ago) the tick is due: it fires on start.
  const second = await past(dir, 24 * 60 + 5);
  let runs = [];
  for (let i = 0; i < 200 && !runs.some((r) => r.status === "succeeded"); i++) {
    await new Promise((r) => setTimeout(r, 50));
    runs = (await api(second.base, `/api/v1/automation/jobs/${job.body.id}/runs`)).body.runs;
  }
  assert.ok(runs.some((r) => r.status === "succeeded"), JSON.stringify(runs));
  const paused = await api(second.base, `/api/v1/automation/jobs/${job.body.id}`, { method: "PATCH", body: JSON.stringify({ enabled: false }) });
  assert.equal(paused.status, 200);
  const threadId = crypto.randomUUID();
  const accepted = await api(second.base, "/api/v1/agent/runs", {
    method: "POST",
    body: JSON.stringify({
      threadId,
      runId: "yesterday-1",
      messages: [{ id: "yesterday-1-u", role: "user", content: "good morning from yesterday" }],
      forwardedProps: { runtime_mode: "chat" },
    }),
  });
  assert.equal(accepted.status, 202);
  await waitRun(second.base, "yesterday-1");
  await second.stop();
  return { threadId, jobId: job.body.id };
}

/**
 * axe-core on the page as it is now: no violation of impact serious or
 * critical (each printed in full otherwise).
 */
async function axe(page, view, { minContrastChecked = 0 } = {}) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.evaluate(AXE);
  const violations = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ["violations"] })).violations);
  if (minContrastChecked > 0) {
    // The elements whose colours axe judged: a page not drawn yet has next to none.
    const checked = await page.evaluate(async () => {
      const { passes, violations, incomplete } = await window.axe.run(document, { runOnly: ["color-contrast"] });
      return [...passes, ...violations, ...incomplete].reduce((n, rule) => n + rule.nodes.length, 0);
    });
    assert.ok(checked >= minContrastChecked, `axe on ${view}: only ${checked} elements' contrast checked (at least ${minContrastChecked} expected)`);
  }
  const bad = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  const full = bad.map((v) => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    helpUrl: v.helpUrl,
    nodes: v.nodes.map((n) => ({ target: n.target, html: n.html, summary: n.failureSummary })),
  }));
  assert.equal(bad.length, 0, `axe on ${view}:\n${JSON.stringify(full, null, 2)}`);
}

/** Presses `key` until the focused element matches `selector` (at most `max` presses). */
async function focusByKeys(page, selector, key = "Tab", max = 200) {
  for (let i = 0; i < max; i++) {
    if (await page.evaluate((sel) => document.activeElement?.matches(sel) ?? false, selector)) return;
    await page.keyboard.press(key);
  }
  throw new Error(`${max} presses of ${key} did not reach ${selector}`);
}

const utcToday = () => new Date().toISOString().slice(0, 10);

before(async () => {
  const dir = dataDir("local");
  seeded = await seed(dir);
  local = await serve({ dir, args: ["--builtin-token-delay-ms", "40"] });
  front = await proxy(local.base);
  llm = await fakeProvider();
  provider = await serve({
    dir: dataDir("provider"),
    env: { AGWIRE_LLM_BASE_URL: llm.url, AGWIRE_LLM_API_KEY: "sk-fake", AGWIRE_LLM_MODEL: "fake-model" },
  });
  secured = await serve({ dir: dataDir("secured"), args: ["--jwt-secret", SECRET] });
  expiring = await serve({ dir: dataDir("expiring"), config: SHORT_TTL });
  skewed = await serve({ dir: dataDir("skewed"), config: SHORT_TTL, env: clockAhead(10) });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  await Promise.all([local?.stop(), provider?.stop(), secured?.stop(), expiring?.stop(), skewed?.stop()]);
  await front?.close();
  await llm?.close();
});

/**
 * A browser test: on failure every page it opened is photographed
 * (out/fail-*.png); its contexts are closed after it.
 */
/** Each browser test fails after two minutes rather than hanging the run. */
const TEST_TIMEOUT_MS = 120_000;

function browserTest(name, fn) {
  test(name, { timeout: TEST_TIMEOUT_MS }, async () => {
    pages.length = 0;
    try {
      await fn();
    } catch (error) {
      const slug = name.replace(/[^a-z0-9]+/gi, "-").slice(0, 40);
      for (const p of pages) console.log("requests still open:", [...(p.pending?.entries() ?? [])].map(([r, t]) => `${r.method()} ${r.url()} ${(performance.now() - t).toFixed(0)}ms`));
      await Promise.all(pages.map((p, i) => p.page.screenshot({ path: join(OUT, `fail-${slug}-${i}.png`) }).catch(() => {})));
      throw error;
    } finally {
      await Promise.all(pages.map((p) => p.context.close().catch(() => {})));
    }
  });
}

/** Opens the app; the returned check() asserts the page logged nothing unexplained. */
async function app(base, { allowed = [], hash = "", ...options } = {}) {
  const opened = await openPage(browser, options);
  pages.push(opened);
  // Requests not answered yet, printed when the test fails (a hang shows where).
  opened.pending = new Map();
  opened.page.on("request", (r) => opened.pending.set(r, performance.now()));
  opened.page.on("requestfinished", (r) => opened.pending.delete(r));
  opened.page.on("requestfailed", (r) => opened.pending.delete(r));
  const started = performance.now();
  await opened.page.goto(`${base}/${hash}`);
  return {
    ...opened,
    started,
    check() {
      assert.deepEqual(opened.unexplained(allowed), [], "console errors, warnings or exceptions");
    },
  };
}

browserTest("the app loads at / with no token in local mode, on yesterday's history", async () => {
  const { page, check } = await app(front.base);
  await page.locator("#message").waitFor();
  // The latest thread opens by default: yesterday's turn.
  const day = page.locator("[data-testid=day]").first();
  await day.waitFor();
  assert.ok((await day.getAttribute("data-day")) < utcToday());
  assert.notEqual(await day.textContent(), "Today");
  await page.getByText("You said: good morning from yesterday").waitFor();
  assert.equal(await page.locator("#token").count(), 0);
  await axe(page, "history (yesterday's thread)");
  check();
});

browserTest("a message streams in as Markdown, sanitized", async () => {
  const { page, check } = await app(front.base);
  await page.locator("#message").waitFor();
  await say(page, `hello **bold** world ${WORDS}`);
  // Streamed: the answer is seen growing before it is complete.
  const lengths = new Set();
  const answer = page.locator("[data-testid=assistant-message]").last();
  await page.getByText("You said: hello").waitFor();
  const until = Date.now() + 30_000;
  while ((await page.locator("[data-testid=progress]").count()) > 0) {
    assert.ok(Date.now() < until, "the answer was still streaming after 30 s");
    lengths.add((await answer.textContent()).length);
    await page.waitForTimeout(30);
  }
  assert.ok(lengths.size >= 3, `saw ${lengths.size} lengths of the streaming answer`);
  assert.equal(await answer.locator("strong").textContent(), "bold");
  assert.equal((await answer.textContent()).trim(), `You said: hello bold world ${WORDS}`);
  // Markdown from a model cannot run script or carry javascript: links.
  await say(page, 'look <img src=x onerror="alert(1)"> and [click](javascript:alert(2)) <script>alert(3)</script>');
  await page.getByText("You said: look").waitFor();
  await idle(page);
  const last = page.locator("[data-testid=assistant-message]").last();
  // Raw HTML is shown as text; the javascript: link loses its href.
  assert.match(await last.textContent(), /look <img src=x onerror="alert\(1\)"> and click <script>alert\(3\)<\/script>/);
  assert.equal(await last.locator("img, script").count(), 0);
  assert.equal(await last.locator("a").count(), 1);
  assert.equal(await last.locator("a").getAttribute("href"), null);
  check();
});

browserTest("a calendar request shows its tool card and ui_schema card, in the browser's zone", async () => {
  const { page, check } = await app(front.base);
  await page.locator("#message").waitFor();
  await say(page, "put a meeting in my calendar tomorrow at 9");
  const card = page.locator("[data-testid=ui-card]").last();
  await card.waitFor();
  await idle(page);
  assert.equal(await card.locator(".ui-title").textContent(), "put a meeting in my calendar tomorrow at 9");
  assert.equal(await card.locator(".ui-badge").textContent(), "CREATED");
  // client_time carried the browser's zone (the context runs in Los Angeles);
  // Start and End are one range, written for an en-US reader in that zone.
  assert.equal(await card.locator("dd").nth(1).textContent(), "America/Los_Angeles");
  assert.equal(await card.locator("dt").first().textContent(), "When");
  assert.match(await card.locator("dd time").getAttribute("datetime"), /T09:00:00-0[78]:00$/);
  assert.match(await card.locator("dd").first().textContent(), /^[A-Z][a-z]{2}, [A-Z][a-z]{2} \d+, 0?9:00\s*–\s*10:00\sAM \(America\/Los_Angeles\)$/);
  await page.screenshot({ path: join(OUT, "chat-1280.png") });
  await axe(page, "chat with a calendar card");
  const tool = page.locator("[data-testid=tool-card][data-tool=calendar_write]").last();
  await tool.locator("summary").click();
  assert.match(await tool.locator("[data-testid=tool-result]").textContent(), /"event_timezone": "America\/Los_Angeles"/);
  // A card's message button sends its text as the next turn.
  await card.getByRole("button", { name: "Delete" }).click();
  await page.locator("[data-testid=user-message]", { hasText: 'Delete the event "put a meeting in my calendar tomorrow at 9"' }).waitFor();
  await idle(page);
  check();
});

browserTest("images: previews, the server's refusal as-is, send, and the same images after a reload", async () => {
  const { page, check } = await app(front.base, { allowed: [/status of 415/] });
  await page.locator("#message").waitFor();
  const png = await page.screenshot({ clip: { x: 0, y: 0, width: 48, height: 48 } });
  const input = page.locator("[data-testid=file-input]");
  await input.setInputFiles({ name: "not-an-image.png", mimeType: "image/png", buffer: Buffer.from("plain text, not a picture") });
  const refused = page.locator("[data-testid=attachment-error]");
  await refused.waitFor();
  assert.equal(await refused.textContent(), "the upload is not a PNG, JPEG, GIF or WebP image");
  await page.getByRole("button", { name: "Remove not-an-image.png" }).click();
  await input.setInputFiles([
    { name: "one.png", mimeType: "image/png", buffer: png },
    { name: "two.png", mimeType: "image/png", buffer: png },
  ]);
  await page.waitForFunction(() => document.querySelectorAll("[data-testid=attachment-preview].pick-ready").length === 2);
  await say(page, "what is in these pictures");
  await page.getByText("You said: what is in these pictures").waitFor();
  await idle(page);
  const sent = page.locator("[data-testid=user-message]").last().locator("[data-testid=message-image]");
  assert.equal(await sent.count(), 2);
  await page.reload();
  await page.getByText("You said: what is in these pictures").waitFor();
  const again = page.locator("[data-testid=user-message]", { hasText: "what is in these pictures" }).locator("[data-testid=message-image]");
  assert.equal(await again.count(), 2);
  await page.waitForFunction(
    () => [...document.querySelectorAll("[data-testid=message-image]")].slice(-2).every((img) => img.complete && img.naturalWidth === 48),
  );
  assert.match(await again.first().getAttribute("src"), /\/api\/v1\/agent\/attachments\/.+sig=/);
  check();
});

browserTest("a frontend tool: the model asks, the user approves, the answer goes back as a tool message", async () => {
  const { page, check } = await app(front.base);
  await page.locator("#message").waitFor();
  const bodies = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().endsWith("/api/v1/agent/runs")) bodies.push(JSON.parse(r.postData()));
  });
  await say(page, "please confirm_action before going on");
  const confirm = page.locator("[data-testid=confirm-card]").last();
  await confirm.getByRole("button", { name: "Approve" }).click();
  await page.getByText("You said: Approved.").waitFor();
  await idle(page);
  assert.equal(await confirm.locator("[data-testid=confirm-answer]").textContent(), "Approved");
  const [ask, answer] = bodies;
  assert.deepEqual(
    ask.tools.map((t) => t.name),
    ["confirm_action", "set_theme"],
  );
  assert.equal(ask.forwardedProps.runtime_mode, "chat");
  assert.equal(ask.forwardedProps.client_time.device_timezone, "America/Los_Angeles");
  assert.match(ask.forwardedProps.client_time.client_now_iso, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d-0[78]:00$/);
  assert.equal(typeof ask.forwardedProps.client_time.client_epoch_ms, "number");
  assert.deepEqual(
    answer.messages.map((m) => m.role),
    ["user", "tool"],
  );
  assert.equal(answer.messages[0].content, "Approved.");
  assert.deepEqual(JSON.parse(answer.messages[1].content), { approved: true });
  check();
});

browserTest("stop: the run is cancelled and what it said stays", async () => {
  const { page, check } = await app(front.base);
  await page.locator("#message").waitFor();
  const streams = [];
  page.on("request", (r) => {
    const m = r.url().match(/\/api\/v1\/agent\/runs\/([^/]+)\/events/);
    if (m) streams.push(decodeURIComponent(m[1]));
  });
  await say(page, LONG);
  await page.getByText("You said: apple banana").waitFor();
  await page.getByRole("button", { name: "Stop the run" }).click();
  await page.locator("[data-testid=notice-stopped]").waitFor();
  const said = await page.locator("[data-testid=assistant-message]").last().textContent();
  assert.ok(said.startsWith("You said: apple") && said.length < `You said: ${LONG}`.length, said);
  assert.equal(streams.length, 1);
  assert.equal((await waitRun(front.base, streams[0])).status, "cancelled");
  check();
});

browserTest("a dropped connection resumes with Last-Event-ID: the answer arrives once, whole", async () => {
  const { page, check } = await app(front.base, { allowed: [/^console\.error: Failed to load resource: net::ERR_[A-Z_]+ \(.*\/events\)$/] });
  await page.locator("#message").waitFor();
  const before = front.heads.length;
  await say(page, `cut ${LONG}`);
  await page.getByText("You said: cut apple banana cherry").waitFor();
  assert.ok(front.cut() > 0, "connections were open");
  await page.getByText(`You said: cut ${LONG}`, { exact: true }).waitFor({ timeout: 20_000 });
  await idle(page);
  const answers = (await page.locator("[data-testid=assistant-message]").allTextContents()).map((a) => a.trim());
  assert.deepEqual(answers.filter((a) => a.startsWith("You said: cut ")), [`You said: cut ${LONG}`]);
  const resumed = front.heads.slice(before).filter((h) => /^GET \/api\/v1\/agent\/runs\/[^/]+\/events/.test(h));
  assert.ok(resumed.length >= 2, resumed.join("\n"));
  assert.match(resumed[resumed.length - 1], /\r\nlast-event-id: [1-9]\d*/i);
  check();
});

browserTest("a reload mid-run reattaches to the running run", async () => {
  const { page, check } = await app(front.base);
  await page.locator("#message").waitFor();
  await say(page, `again ${LONG}`);
  await page.getByText("You said: again apple banana").waitFor();
  await page.reload();
  await page.getByText(`You said: again ${LONG}`, { exact: true }).waitFor({ timeout: 20_000 });
  await idle(page);
  const answers = (await page.locator("[data-testid=assistant-message]").allTextContents()).map((a) => a.trim());
  assert.deepEqual(answers.filter((a) => a.startsWith("You said: again ")), [`You said: again ${LONG}`]);
  check();
});

browserTest("scrolling up loads the previous day (before=)", async () => {
  const { page, check } = await app(front.base);
  await page.getByText(`You said: again ${LONG}`, { exact: true }).waitFor();
  const days = page.locator("[data-testid=day]");
  // One day opened: today's (UTC, the profile has no zone). Its separator
  // heads a day taller than the window draws, so it is not in the DOM: the
  // history requests say which days were asked for.
  const asked = () => page.evaluate(() => performance.getEntriesByType("resource").map((e) => e.name).filter((u) => u.includes("/api/v1/agent/history")));
  const opened = await asked();
  assert.equal(opened.length, 1, opened.join("\n"));
  assert.ok(!opened[0].includes("before="), opened[0]);
  const today = utcToday();
  const requested = page.waitForRequest((r) => r.url().includes(`before=${today}`));
  await page.locator(".scroller").evaluate((el) => {
    el.scrollTop = 0;
    el.dispatchEvent(new Event("scroll"));
  });
  await requested;
  await page.getByText("You said: good morning from yesterday").waitFor();
  assert.equal(await days.count(), 2);
  assert.ok((await days.first().getAttribute("data-day")) < today);
  assert.equal(await days.last().textContent(), "Today");
  check();
});

browserTest("calendar: the event in the user's zone; the profile's zone is editable", async () => {
  const { page, check } = await app(front.base, { hash: "#/calendar", allowed: [/status of 422/] });
  const event = page.locator("[data-testid=calendar-event]").first();
  await event.waitFor();
  assert.match(await event.textContent(), /09:00\s*AM – 10:00\s*AM.*put a meeting/);
  await page.locator("[data-testid=timezone-input]").fill("Asia/Tokyo");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText("Saved.", { exact: false }).waitFor();
  await page.waitForFunction(() => /02:00\s*AM/.test(document.querySelector("[data-testid=calendar-event]")?.textContent ?? ""));
  assert.equal((await api(front.base, "/api/v1/me/profile")).body.settings.timezone, "Asia/Tokyo");
  await page.locator("[data-testid=timezone-input]").fill("Mars/Olympus");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText("invalid settings.timezone").waitFor();
  await page.screenshot({ path: join(OUT, "calendar-1280.png") });
  await axe(page, "calendar");
  // Back to UTC days for the tests after this one.
  await api(front.base, "/api/v1/me/profile", { method: "PATCH", body: JSON.stringify({ settings: { timezone: null } }) });
  check();
});

browserTest("automations: create, pause, resume, delete; a job's runs and a run's transcript", async () => {
  const { page, check } = await app(front.base, { hash: "#/automations", allowed: [/status of 422/] });
  await page.getByText("Minute check").waitFor();
  await page.locator("[data-testid=job]", { hasText: "Minute check" }).getByText("Paused").waitFor();
  await page.getByTestId("new-job").click();
  await page.getByLabel("Name").fill("Weekday brief");
  await page.getByLabel("Prompt").fill("what is on my calendar today");
  await page.getByLabel("Cron", { exact: true }).check();
  await page.getByLabel("Cron expression").fill("0 9 * * 1-5");
  await page.getByLabel("Time zone").fill("Europe/Paris");
  await page.getByLabel("Agent").fill("nobody");
  await page.getByRole("button", { name: "Create" }).click();
  await page.getByTestId("job-error").waitFor();
  assert.match(await page.getByTestId("job-error").textContent(), /^invalid config: /);
  await page.getByLabel("Agent").fill("calendar");
  await page.getByLabel("calendar_read").check();
  await page.getByRole("button", { name: "Create" }).click();
  const job = page.locator("[data-testid=job]", { hasText: "Weekday brief" });
  await job.waitFor();
  assert.match(await job.textContent(), /cron 0 9 \* \* 1-5 · Europe\/Paris/);
  await job.getByRole("button", { name: "Pause" }).click();
  await job.getByText("Paused").waitFor();
  await job.getByRole("button", { name: "Resume" }).click();
  await job.getByText("Active").waitFor();
  await page.screenshot({ path: join(OUT, "automations-1280.png") });
  await axe(page, "automations");
  await job.getByRole("button", { name: "Delete…" }).click();
  await job.getByRole("button", { name: "Delete", exact: true }).click();
  await job.waitFor({ state: "detached" });
  const jobs = (await api(front.base, "/api/v1/automation/jobs")).body.jobs;
  assert.deepEqual(jobs.map((j) => j.name), ["Minute check"]);
  // The seeded job's tick ran a day ago.
  await page.getByRole("link", { name: "Minute check" }).click();
  const run = page.locator("[data-testid=job-run]").first();
  await run.waitFor();
  await run.locator("button").click();
  const transcript = run.locator("[data-testid=transcript]");
  await transcript.getByText("You said: status report please").waitFor();
  assert.equal(await transcript.locator("[data-testid=user-message]").textContent(), "status report please");
  await axe(page, "an automation's runs and a transcript");
  check();
});

browserTest("provider: collapsed reasoning, a render_ui card with every node, a card's tool button, and the same card from history", async () => {
  const { page, check } = await app(provider.base);
  await page.locator("#message").waitFor();
  await say(page, "show me every node");
  const card = page.locator("[data-testid=ui-card]").last();
  await card.waitFor();
  await page.getByText("Here is every kind of node.").waitFor();
  await idle(page);
  const reasoning = page.locator("[data-testid=reasoning]").last();
  assert.equal(await reasoning.getAttribute("open"), null, "reasoning is collapsed");
  assert.equal(await reasoning.locator(".reasoning-text").textContent(), "The user wants a card with every node type.");
  const count = (selector) => card.locator(selector).count();
  assert.equal(await count(".ui-card"), 1);
  assert.equal(await count(".ui-stack.ui-horizontal"), 1);
  assert.equal(await count(".ui-title"), 1);
  assert.equal(await count(".ui-subtitle"), 1);
  assert.equal(await count(".ui-caption"), 1);
  assert.equal(await count("pre.ui-code"), 1);
  assert.ok((await count("p.ui-body")) >= 2);
  assert.equal(await count(".ui-badge"), 5);
  assert.equal(await count("dl.ui-kv"), 2);
  assert.equal(await count("ol.ui-list"), 1);
  assert.equal(await count("ul.ui-list"), 1);
  assert.equal(await count("hr.ui-divider"), 1);
  assert.equal(await count("img.ui-image"), 1, "the javascript: image is refused");
  assert.equal(await count("button.ui-button"), 3);
  for (const status of ["success", "info", "warning", "error", "pending"]) {
    assert.equal(await card.locator(`.ui-badge.ui-status-${status}`).count(), 1, status);
  }
  assert.equal(await card.locator(".ui-title").textContent(), EVERY_NODE_HINT.title);
  await axe(page, "chat with a card of every node");
  const live = await card.evaluate((el) => el.outerHTML);
  await card.getByRole("button", { name: "Go dark" }).click();
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "dark");
  // Drawn dark: the page's background is the dark one and no colour is
  // still in transition (bounded).
  await page.waitForFunction(
    () =>
      getComputedStyle(document.body).backgroundColor === "rgb(17, 17, 20)" &&
      document.getAnimations().every((a) => !(a instanceof CSSTransition) || a.playState === "finished"),
    null,
    { timeout: 10_000 },
  );
  await page.screenshot({ path: join(OUT, "card-dark-1280.png") });
  await axe(page, "chat with cards, dark theme", { minContrastChecked: 20 });
  await page.reload();
  const fromHistory = page.locator("[data-testid=ui-card]").last();
  await fromHistory.waitFor();
  assert.equal(await fromHistory.evaluate((el) => el.outerHTML), live, "a card from history is drawn exactly like the live one");
  await page.evaluate(() => localStorage.removeItem("agwire.theme"));
  check();
});

browserTest("provider: a backend tool's card, a frontend tool round trip, and RUN_ERROR shown plainly", async () => {
  const { page, check } = await app(provider.base);
  await page.locator("#message").waitFor();
  await page.getByTestId("new-thread").click();
  await say(page, "what time is it");
  await page.getByText(/^It is \d{4}-/).waitFor();
  await idle(page);
  const tool = page.locator("[data-testid=tool-card][data-tool=get_current_time]");
  assert.equal(await tool.locator(".tool-state").textContent(), "done");
  await say(page, "book a table for two");
  const confirm = page.locator("[data-testid=confirm-card]");
  await confirm.getByText("Book a table for two at 19:00?").waitFor();
  await idle(page);
  const asked = llm.requests.length;
  await confirm.getByRole("button", { name: "Approve" }).click();
  await page.getByText("Booked, since you approved.").waitFor();
  await idle(page);
  const worker = llm.requests.slice(asked).find((r) => !r.response_format);
  const roles = worker.messages.map((m) => m.role);
  const call = roles.lastIndexOf("assistant");
  assert.deepEqual(roles.slice(call - 0, call + 3), ["assistant", "tool", "user"]);
  assert.equal(worker.messages[call].tool_calls[0].function.name, "confirm_action");
  assert.deepEqual(JSON.parse(worker.messages[call + 1].content), { approved: true });
  await say(page, "fail please");
  const error = page.locator("[data-testid=notice-error]");
  await error.waitFor();
  await idle(page);
  assert.match(await error.textContent(), /the fake model refuses this prompt/);
  check();
});

browserTest("language: Chinese from navigator.languages, English chosen and kept; a zh-CN card is written in Chinese", async () => {
  const token = jwt(SECRET, { sub: "carol", exp: Math.floor(Date.now() / 1000) + 3600 });
  const auth = { authorization: `Bearer ${token}` };
  const patched = await api(secured.base, "/api/v1/me/profile", { method: "PATCH", headers: auth, body: JSON.stringify({ settings: { locale: "zh-CN" } }) });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
  const { page, context, check } = await app(secured.base, { locale: "zh-CN", timezoneId: "Europe/London", allowed: [/status of 401/] });
  await context.addInitScript((t) => sessionStorage.setItem("agwire.token", t), token);
  await page.reload();
  await page.getByRole("link", { name: "聊天" }).waitFor();
  assert.equal(await page.evaluate(() => document.documentElement.lang), "zh-CN");
  assert.equal(await page.locator("#message").getAttribute("placeholder"), "给助手发消息…");
  await page.getByRole("combobox", { name: "语言" }).selectOption("en");
  await page.getByRole("link", { name: "Chat" }).waitFor();
  await page.reload();
  await page.getByRole("link", { name: "Chat" }).waitFor();
  assert.equal(await page.evaluate(() => document.documentElement.lang), "en");
  // The app speaks English; the card speaks the profile's Chinese.
  await say(page, "put a meeting in my calendar tomorrow at 9");
  const card = page.locator("[data-testid=ui-card]").last();
  await card.waitFor();
  await idle(page);
  assert.equal(await card.getAttribute("lang"), "zh-CN");
  assert.equal(await card.getAttribute("dir"), "ltr");
  assert.equal(await card.locator("dt").first().textContent(), "时间");
  assert.match(await card.locator("dd").first().textContent(), /周.*09:00\s*[–至-]\s*10:00 \(Europe\/London\)$/);
  check();
});

browserTest("with --jwt-secret the app asks for a token and keeps it for the tab", async () => {
  const allowed = [/status of 401/];
  const { page, context, check } = await app(secured.base, { allowed });
  const box = page.getByTestId("token-input");
  await box.waitFor();
  await page.screenshot({ path: join(OUT, "token-1280.png") });
  await axe(page, "JWT sign-in");
  await box.fill(jwt("a-different-secret", { sub: "mallory", exp: Math.floor(Date.now() / 1000) + 3600 }));
  await page.getByRole("button", { name: "Continue" }).click();
  await page.getByTestId("token-error").waitFor();
  await box.fill(jwt(SECRET, { sub: "alice", exp: Math.floor(Date.now() / 1000) + 3600 }));
  await page.getByRole("button", { name: "Continue" }).click();
  await page.locator("#message").waitFor();
  const auth = [];
  page.on("request", (r) => r.url().includes("/api/") && auth.push(r.headers().authorization ?? ""));
  await say(page, "hello alice");
  await page.getByText("You said: hello alice").waitFor();
  await idle(page);
  assert.ok(auth.length >= 2 && auth.every((a) => a.startsWith("Bearer ")), JSON.stringify(auth));
  await page.reload();
  await page.getByText("You said: hello alice").waitFor();
  // Another tab does not have it.
  const other = await context.newPage();
  await other.goto(`${secured.base}/`);
  await other.getByTestId("token-input").waitFor();
  await other.close();
  check();
});

browserTest("keyboard and screen readers: every control is named and reachable; 390 px has no sideways scroll", async () => {
  const { page, check } = await app(front.base, { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  await page.locator("#message").waitFor();
  await idle(page);
  // Each view is drawn once what it loads is shown (the seeded thread's
  // turns, the calendar's events or its empty note, the seeded job) and
  // nothing says "Loading…"; the scan then has at least `controls` in main.
  const views = [
    { hash: "#/chat", ready: "[data-testid=day], [data-testid=empty]", controls: 8 },
    { hash: "#/calendar", ready: "[data-testid=calendar-event], [data-testid=calendar-empty]", controls: 5 },
    { hash: "#/automations", ready: ".jobs > li", controls: 4 },
  ];
  const CONTROLS = "button, a[href], input, textarea, select";
  for (const { hash, ready, controls } of views) {
    await page.goto(`${front.base}/${hash}`);
    await page.locator("main h1").waitFor();
    await page.locator(ready).first().waitFor({ timeout: 10_000 });
    await page.waitForFunction(
      ({ CONTROLS, controls }) =>
        document.querySelectorAll(`main :is(${CONTROLS})`).length >= controls &&
        ![...document.querySelectorAll("main *")].some((el) => el.childElementCount === 0 && el.textContent.trim() === "Loading…"),
      { CONTROLS, controls },
      { timeout: 10_000 },
    );
    const { scanned, inMain, unnamed } = await page.evaluate((CONTROLS) => {
      const shown = [...document.querySelectorAll(CONTROLS)].filter((el) => !el.closest("[hidden]") && el.getAttribute("type") !== "hidden");
      const unnamed = shown
        .filter((el) => {
          const labelled = el.labels && el.labels.length > 0;
          const name = (el.getAttribute("aria-label") || el.textContent || el.getAttribute("title") || "").trim();
          return !labelled && !name;
        })
        .map((el) => el.outerHTML.slice(0, 80));
      return { scanned: shown.length, inMain: shown.filter((el) => el.closest("main")).length, unnamed };
    }, CONTROLS);
    console.log(`${hash}: ${scanned} controls scanned, ${inMain} in main`);
    assert.ok(inMain >= controls && scanned >= controls + 5, `${hash}: only ${scanned} controls scanned (${inMain} in main): the view was not drawn`);
    assert.deepEqual(unnamed, [], `${hash}: controls without a name`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `${hash}: ${overflow}px sideways`);
    await page.screenshot({ path: join(OUT, `${hash.slice(2)}-390.png`) });
    await axe(page, `${hash} at 390 px`);
  }
  // The thread list is a sheet at 390 px: a modal dialog, Escape closes it.
  await page.goto(`${front.base}/#/chat`);
  await page.getByTestId("threads-toggle").click();
  const sheet = page.getByTestId("threads-sheet");
  await sheet.locator("[data-testid=thread]").first().waitFor();
  await page.screenshot({ path: join(OUT, "threads-390.png") });
  await axe(page, "the thread sheet at 390 px");
  await page.keyboard.press("Escape");
  await sheet.waitFor({ state: "hidden" });
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "threads-toggle");
  // Keyboard only: skip link to the composer, type, Enter sends — on a page
  // loaded afresh: going to #/chat from #/chat/<id> is a same-document
  // navigation, which leaves focus on the sheet's toggle where Escape put it.
  await page.goto(`${front.base}/#/chat`);
  await page.reload();
  await page.locator("#message").waitFor();
  // Once the latest thread is open (its own URL, the box writable): keys
  // pressed while it loads go to a read-only box, as they should.
  await page.waitForFunction(() => /^#\/chat\/.+/.test(location.hash) && !document.querySelector("#message")?.readOnly);
  await idle(page);
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.className), "skip-link");
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "message");
  await page.keyboard.type("typed with the keyboard");
  await page.keyboard.press("Enter");
  await page.getByText("You said: typed with the keyboard").waitFor();
  await idle(page);
  check();
});

browserTest("keyboard only: send a message, approve a confirm_action, switch threads", async () => {
  const { page, check } = await app(front.base, { hash: "#/chat" });
  await page.locator("#message").waitFor();
  await page.waitForFunction(() => /^#\/chat\/.+/.test(location.hash));
  await idle(page);
  const start = await page.evaluate(() => location.hash);
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.className), "skip-link");
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "message");
  await page.keyboard.type("please confirm_action before going on");
  await page.keyboard.press("Enter");
  const confirm = page.locator("[data-testid=confirm-card]").last();
  await confirm.getByRole("button", { name: "Approve" }).waitFor();
  await idle(page);
  // Back from the message box into the conversation, to Approve.
  await focusByKeys(page, "[data-testid=confirm-card] button.btn-primary", "Shift+Tab", 20);
  await page.keyboard.press("Enter");
  await page.getByText("You said: Approved.").waitFor();
  await idle(page);
  assert.equal(await confirm.locator("[data-testid=confirm-answer]").textContent(), "Approved");
  // Back up to the automation's thread in the list, and open it.
  const job = (await api(front.base, `/api/v1/automation/jobs/${seeded.jobId}`)).body;
  assert.notEqual(start, `#/chat/${job.threadId}`);
  await focusByKeys(page, `.threads-side a[href="#/chat/${job.threadId}"]`, "Shift+Tab");
  await page.keyboard.press("Enter");
  await page.waitForFunction((id) => location.hash === `#/chat/${id}`, job.threadId);
  await page.getByText("You said: status report please").waitFor();
  check();
});

browserTest("threads: yesterday's in the list; open, reload, rename; a run streams on in the background; delete behind a dialog", async () => {
  // The test deletes the automation's thread to see the server's refusal:
  // the browser logs that 409, and only that one is expected.
  const jobThread = (await api(front.base, `/api/v1/automation/jobs/${seeded.jobId}`)).body.threadId;
  const refusal = new RegExp(`status of 409 \\(Conflict\\) \\(.*/api/v1/agent/threads/${jobThread}\\)$`);
  const { page, check } = await app(front.base, { hash: "#/chat", allowed: [refusal] });
  const side = page.locator(".threads-side");
  const yesterday = side.locator(`[data-thread-id="${seeded.threadId}"]`);
  await yesterday.waitFor();
  assert.equal(await yesterday.locator(".thread-title").textContent(), "good morning from yesterday");
  // Newest activity first, as the server lists them, with when each was last active.
  const threads = (await api(front.base, "/api/v1/agent/threads?limit=100")).body.threads;
  const listed = threads.map((t) => t.threadId);
  const seen = threads.find((t) => t.threadId === seeded.threadId);
  assert.equal(await yesterday.locator("time").getAttribute("datetime"), seen.lastActiveAt);
  assert.match(await yesterday.locator("time").textContent(), /^(now|\d+ (minute|hour)s? ago|yesterday)$/);
  const shown = await side.locator("[data-testid=thread]").evaluateAll((els) => els.map((el) => el.dataset.threadId));
  assert.deepEqual(shown, listed.slice(0, shown.length));
  await axe(page, "the thread list");
  // It opens at its latest day: the tests before this one wrote today's turns
  // into it (the latest thread), so yesterday's greeting is a day up.
  const latest = (await api(front.base, `/api/v1/agent/history?threadId=${seeded.threadId}`)).body;
  const lastSaid = latest.messages.filter((m) => m.role === "user").at(-1).content;
  const shows = async () => {
    await page.locator(".chat-thread-title", { hasText: "good morning from yesterday" }).waitFor();
    await page.locator("[data-testid=user-message]").last().getByText(lastSaid, { exact: true }).waitFor();
  };
  await yesterday.locator("a").click();
  await page.waitForFunction((id) => location.hash === `#/chat/${id}`, seeded.threadId);
  await shows();
  await page.reload();
  await shows();
  assert.equal(await page.evaluate(() => location.hash), `#/chat/${seeded.threadId}`);
  // Yesterday's greeting is the day before. Scrolling the button into view
  // can load that day by itself (the sentinel above it), which takes the
  // button away mid-click: either way the day loads.
  const older = page.getByText("You said: good morning from yesterday");
  await Promise.race([older.waitFor(), page.getByTestId("load-older").click().catch(() => {})]);
  await older.waitFor();
  assert.equal(await yesterday.locator("a").getAttribute("aria-current"), "page");
  // Rename in place.
  await yesterday.getByRole("button", { name: "Rename: good morning from yesterday" }).click();
  await yesterday.getByTestId("thread-rename-input").fill("Morning notes");
  await yesterday.getByTestId("thread-rename-input").press("Enter");
  await yesterday.locator(".thread-title", { hasText: "Morning notes" }).waitFor();
  const renamed = (await api(front.base, `/api/v1/agent/threads/${seeded.threadId}`)).body;
  assert.equal(renamed.title, "Morning notes");
  assert.equal(renamed.titleSet, true);
  // A new thread with a long answer; while it streams, back to yesterday's.
  await page.getByTestId("new-thread").click();
  await page.locator("[data-testid=empty]").waitFor();
  const fresh = (await page.evaluate(() => location.hash)).replace("#/chat/", "");
  await say(page, `background ${LONG}`);
  const busy = side.locator(`[data-thread-id="${fresh}"]`);
  await busy.getByTestId("thread-active").waitFor();
  assert.equal(await side.locator("[data-testid=thread]").first().getAttribute("data-thread-id"), fresh, "the new thread is on top");
  await yesterday.locator("a").click();
  await page.locator(".chat-thread-title", { hasText: "Morning notes" }).waitFor();
  await page.locator("[data-testid=user-message]").last().getByText(lastSaid, { exact: true }).waitFor();
  await busy.getByTestId("thread-active").waitFor({ state: "detached", timeout: 30_000 });
  await busy.locator("a").click();
  const whole = page.getByText(`You said: background ${LONG}`, { exact: true });
  await whole.waitFor();
  assert.equal(await whole.count(), 1);
  // Delete it: a modal dialog that keeps focus, Escape closes it and focus comes back.
  const remove = busy.getByTestId("thread-delete");
  await remove.click();
  const dialog = page.getByTestId("delete-dialog");
  await dialog.waitFor();
  await axe(page, "the delete dialog");
  for (let i = 0; i < 4; i++) {
    await page.keyboard.press("Tab");
    assert.ok(await page.evaluate(() => Boolean(document.activeElement?.closest("dialog[open]"))), "focus stays in the dialog");
  }
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "hidden" });
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "thread-delete");
  await remove.click();
  await dialog.getByRole("button", { name: "Delete", exact: true }).click();
  await busy.waitFor({ state: "detached" });
  assert.equal((await api(front.base, `/api/v1/agent/threads/${fresh}`)).status, 404);
  // The newest thread left is opened.
  const newest = (await api(front.base, "/api/v1/agent/threads?limit=1")).body.threads[0].threadId;
  await page.waitForFunction((id) => location.hash === `#/chat/${id}`, newest);
  // Its button went with it: focus lands on "New thread".
  await page.waitForFunction(() => document.activeElement?.dataset.testid === "new-thread");
  // An automation's thread is the job's to delete: the server's word, in the dialog.
  const job = (await api(front.base, `/api/v1/automation/jobs/${seeded.jobId}`)).body;
  const automated = side.locator(`[data-thread-id="${job.threadId}"]`);
  await automated.getByTestId("thread-delete").click();
  await dialog.getByRole("button", { name: "Delete", exact: true }).click();
  await dialog.getByTestId("delete-error").waitFor();
  assert.equal(await dialog.getByTestId("delete-error").textContent(), `thread belongs to automation job ${seeded.jobId}: delete the job first`);
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "hidden" });
  check();
});

browserTest("a confirmation left pending is asked again after a reload and in another tab; a second answer is refused plainly", async () => {
  const { page, context, check } = await app(front.base, { hash: "#/chat", allowed: [/status of 409/] });
  await page.locator("#message").waitFor();
  await page.getByTestId("new-thread").click();
  await page.locator("[data-testid=empty]").waitFor();
  await say(page, "please confirm_action before going on");
  await page.locator("[data-testid=confirm-card]").getByRole("button", { name: "Approve" }).waitFor();
  await idle(page);
  const url = page.url();
  const threadId = url.split("#/chat/")[1];
  const pending = (await api(front.base, `/api/v1/agent/threads/${threadId}`)).body.pendingToolCalls;
  assert.deepEqual(pending.map((p) => p.name), ["confirm_action"]);
  await page.reload();
  const again = page.locator("[data-testid=confirm-card]");
  await again.getByRole("button", { name: "Approve" }).waitFor();
  // Another tab answers first.
  const other = await context.newPage();
  await other.goto(url);
  await other.locator("[data-testid=confirm-card]").getByRole("button", { name: "Approve" }).click();
  await other.getByText("You said: Approved.").waitFor();
  await idle(other);
  await other.close();
  // This tab's answer comes second: the server's detail, and the card goes.
  await again.getByRole("button", { name: "Approve" }).click();
  const refused = page.locator("[data-testid=notice-error]");
  await refused.waitFor();
  assert.match(await refused.textContent(), new RegExp(`tool call ${pending[0].toolCallId} was already answered`));
  await again.waitFor({ state: "detached" });
  await idle(page);
  assert.equal(await page.getByText("You said: Approved.").count(), 0, "the refused turn is not shown as sent");
  check();
});

browserTest("threads page by nextCursor: scrolling the list loads the next page", async () => {
  const token = jwt(SECRET, { sub: "dave", exp: Math.floor(Date.now() / 1000) + 3600 });
  const auth = { authorization: `Bearer ${token}` };
  for (let i = 0; i < 33; i++) {
    const runId = `dave-${i}`;
    const accepted = await api(secured.base, "/api/v1/agent/runs", {
      method: "POST",
      headers: auth,
      body: JSON.stringify({
        threadId: crypto.randomUUID(),
        runId,
        messages: [{ id: `${runId}-u`, role: "user", content: `thread ${i}` }],
        forwardedProps: { runtime_mode: "chat" },
      }),
    });
    assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
    await waitRun(secured.base, runId, auth);
  }
  const { page, context, check } = await app(secured.base, { allowed: [/status of 401/] });
  await context.addInitScript((t) => sessionStorage.setItem("agwire.token", t), token);
  await page.reload();
  const items = page.locator(".threads-side [data-testid=thread]");
  await page.waitForFunction(() => document.querySelectorAll(".threads-side [data-testid=thread]").length === 30);
  assert.equal(await items.first().locator(".thread-title").textContent(), "thread 32");
  await page.locator(".threads-side").evaluate((el) => el.scrollTo(0, el.scrollHeight));
  await page.waitForFunction(() => document.querySelectorAll(".threads-side [data-testid=thread]").length === 33);
  assert.equal(await items.last().locator(".thread-title").textContent(), "thread 0");
  assert.equal(await page.getByTestId("threads-more").count(), 0);
  check();
});

browserTest("screenshots of a conversation for the README, at 1280 and 390 px", async () => {
  const { page, check } = await app(front.base);
  await page.locator("#message").waitFor();
  await idle(page);
  await page.getByTestId("new-thread").click();
  await say(page, "What time is it?");
  await page.getByText(/^It is \d{4}-/).waitFor();
  await idle(page);
  // A picture to attach, drawn in the page.
  const picture = await page.evaluate(() => {
    const canvas = document.createElement("canvas");
    canvas.width = 320;
    canvas.height = 240;
    const g = canvas.getContext("2d");
    const sky = g.createLinearGradient(0, 0, 0, 240);
    sky.addColorStop(0, "#fbc2eb");
    sky.addColorStop(1, "#a6c1ee");
    g.fillStyle = sky;
    g.fillRect(0, 0, 320, 240);
    g.fillStyle = "#ffe29f";
    g.beginPath();
    g.arc(160, 150, 46, 0, Math.PI * 2);
    g.fill();
    g.fillStyle = "#5b6b9a";
    g.fillRect(0, 170, 320, 70);
    return canvas.toDataURL("image/png").split(",")[1];
  });
  await page.locator("[data-testid=file-input]").setInputFiles({ name: "table.png", mimeType: "image/png", buffer: Buffer.from(picture, "base64") });
  await page.locator("[data-testid=attachment-preview].pick-ready").waitFor();
  await say(page, "Put lunch with Ana in my calendar tomorrow at 1pm");
  await page.locator("[data-testid=ui-card]").waitFor();
  await idle(page);
  await page.locator("[data-testid=message-image]").evaluate((img) => img.decode());
  await page.screenshot({ path: join(OUT, "readme-1280.png") });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(100);
  await page.screenshot({ path: join(OUT, "readme-390.png") });
  check();
});

browserTest("sending while a run streams: Interrupt stops it (what it said stays) and runs the new turn; Queue runs it after", async () => {
  const { page, check } = await app(front.base);
  await page.locator("#message").waitFor();
  await idle(page);
  await page.getByTestId("new-thread").click();
  await page.locator("[data-testid=empty]").waitFor();
  const posts = [];
  page.on("request", (r) => {
    const url = new URL(r.url());
    if (r.method() === "POST" && url.pathname === "/api/v1/agent/runs") posts.push({ query: url.search, runId: JSON.parse(r.postData()).runId });
  });
  // Long enough to be still streaming while the choice is made and checked.
  const first = `first ${LONG} ${LONG} ${LONG} ${LONG}`;
  await say(page, first);
  await page.getByText("You said: first apple banana").waitFor();
  // Keyboard only: Enter while it streams opens the choice, on Interrupt.
  await page.locator("#message").fill("second, interrupting");
  await page.locator("#message").press("Enter");
  const choice = page.getByTestId("busy-choice");
  await choice.waitFor();
  await page.waitForFunction(() => document.activeElement?.dataset.testid === "send-interrupt", null, { timeout: 2_000 });
  await page.screenshot({ path: join(OUT, "busy-choice-1280.png") });
  await axe(page, "the choice of sending while a run streams");
  await page.keyboard.press("Enter");
  await choice.waitFor({ state: "detached" });
  // The first answer ends as a stopped one does; the second turn runs.
  await page.locator("[data-testid=notice-stopped]").waitFor();
  await page.getByText("You said: second, interrupting", { exact: true }).waitFor();
  await idle(page);
  const said = (await page.locator("[data-testid=assistant-message]").allTextContents()).map((a) => a.trim());
  assert.equal(said.length, 2, JSON.stringify(said));
  assert.ok(said[0].startsWith("You said: first apple") && said[0].length < `You said: ${first}`.length, said[0]);
  const users = (await page.locator("[data-testid=user-message]").allTextContents()).map((u) => u.trim());
  assert.deepEqual(users, [first, "second, interrupting"]);
  assert.deepEqual(posts.map((p) => p.query), ["", "?multitask_strategy=interrupt"]);
  assert.equal((await waitRun(front.base, posts[0].runId)).status, "cancelled");
  assert.equal((await waitRun(front.base, posts[1].runId)).status, "succeeded");
  // Queue: the answer going is not stopped; the queued turn is shown waiting, then runs.
  const third = `third ${LONG} ${LONG}`;
  await say(page, third);
  await page.getByText("You said: third apple banana").waitFor();
  await say(page, "fourth, queued");
  await choice.getByRole("button", { name: "Queue" }).click();
  const waiting = page.getByTestId("waiting-message");
  await waiting.waitFor();
  await page.screenshot({ path: join(OUT, "queued-1280.png") });
  assert.equal(await waiting.locator(".bubble-text").textContent(), "fourth, queued");
  assert.equal(await waiting.locator(".waiting-tag").textContent(), "Queued: sent when the current answer ends");
  await page.getByText(`You said: ${third}`, { exact: true }).waitFor();
  await page.getByText("You said: fourth, queued", { exact: true }).waitFor();
  await idle(page);
  assert.equal(await waiting.count(), 0);
  assert.equal(await page.locator("[data-testid=notice-stopped]").count(), 1, "only the interrupted answer is stopped");
  assert.deepEqual(posts.slice(2).map((p) => p.query), ["", "?multitask_strategy=enqueue"]);
  assert.equal((await waitRun(front.base, posts[2].runId)).status, "succeeded");
  assert.equal((await waitRun(front.base, posts[3].runId)).status, "succeeded");
  check();
});

browserTest("an approval says until when it is valid and goes when that passes; it is not asked again after a reload", async () => {
  const { page, check } = await app(expiring.base);
  await page.locator("#message").waitFor();
  await say(page, "please confirm_action before going on");
  const card = page.locator("[data-testid=confirm-card]");
  await card.getByRole("button", { name: "Approve" }).waitFor();
  await idle(page);
  const until = card.getByTestId("confirm-expiry");
  await until.waitFor();
  // Two seconds away: to the second, in the reader's words.
  assert.match(await until.textContent(), /^Valid until \d{1,2}:\d\d:\d\d\s[AP]M$/);
  const expiresAt = Date.parse(await until.locator("time").getAttribute("datetime"));
  assert.ok(Math.abs(expiresAt - Date.now()) < 3_000, `expires at ${new Date(expiresAt).toISOString()}`);
  await page.screenshot({ path: join(OUT, "confirm-expiry-1280.png") });
  await axe(page, "a confirmation with its expiry");
  // The app's own timer takes the card away, and says so.
  await card.waitFor({ state: "detached", timeout: 10_000 });
  assert.ok(Date.now() >= expiresAt, "not before its time");
  const expired = page.getByTestId("notice-expired");
  await expired.waitFor();
  assert.equal(await expired.textContent(), "This approval expired; ask again.");
  const threadId = (await page.evaluate(() => location.hash)).replace("#/chat/", "");
  assert.deepEqual((await api(expiring.base, `/api/v1/agent/threads/${threadId}`)).body.pendingToolCalls, []);
  await page.reload();
  await page.locator("[data-testid=user-message]", { hasText: "please confirm_action before going on" }).waitFor();
  await page.waitForFunction(() => !document.querySelector("#message")?.readOnly);
  assert.equal(await card.count(), 0);
  check();
});

browserTest("an answer that comes after the approval expired is refused plainly: the card goes, the line says why", async () => {
  // The server's clock is ahead: its expiry passes while the app's timer still waits.
  const { page, check } = await app(skewed.base, { allowed: [/status of 409 \(Conflict\) \(.*\/api\/v1\/agent\/runs\)$/] });
  await page.locator("#message").waitFor();
  await say(page, "please confirm_action before going on");
  const card = page.locator("[data-testid=confirm-card]");
  const approve = card.getByRole("button", { name: "Approve" });
  await approve.waitFor();
  await idle(page);
  await card.getByTestId("confirm-expiry").waitFor();
  const threadId = (await page.evaluate(() => location.hash)).replace("#/chat/", "");
  const deadline = Date.now() + 10_000;
  while ((await api(skewed.base, `/api/v1/agent/threads/${threadId}`)).body.pendingToolCalls.length > 0) {
    assert.ok(Date.now() < deadline, "the server still lists the call after 10 s");
    await new Promise((r) => setTimeout(r, 100));
  }
  await approve.click();
  const expired = page.getByTestId("notice-expired");
  await expired.waitFor();
  assert.equal(await expired.textContent(), "This approval expired; ask again.");
  await card.waitFor({ state: "detached" });
  await idle(page);
  assert.equal(await page.getByText("You said: Approved.").count(), 0, "the refused turn is not shown as sent");
  assert.equal(await page.locator("[data-testid=user-message]", { hasText: "Approved." }).count(), 0);
  check();
});
