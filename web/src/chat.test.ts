import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError, type Api, type HistorySnapshot } from "./api";
import { ChatController, ChatPool, expiredToolCall, refusedToolCall } from "./chat";
import type { ThreadDetail } from "./threads";
import { toRows } from "./view";

/** An Api whose history answer the test releases when it wants. */
function slowHistory(): { api: Api; answer: (snapshot: HistorySnapshot) => void } {
  let answer: (snapshot: HistorySnapshot) => void = () => {};
  const pending = new Promise<HistorySnapshot>((resolve) => {
    answer = resolve;
  });
  const api = {
    get: (path: string) => (path.startsWith("/api/v1/agent/history") ? pending : Promise.reject(new ApiError(404, "no endpoint"))),
  } as unknown as Api;
  return { api, answer: (snapshot) => answer(snapshot) };
}

const flush = () => new Promise((r) => setTimeout(r, 0));

describe("the chat's threads", () => {
  it("a new thread opened while the latest one loads stays open", async () => {
    const { api, answer } = slowHistory();
    const pool = new ChatPool(api, () => {});
    let navigated: string | null = null;
    pool.showLatest((chat) => (navigated = chat.threadId));
    const fresh = pool.show("fresh-thread", true);
    answer({
      threadId: "older-thread",
      day: "2026-11-23",
      hasMore: false,
      messages: [{ id: "u1", seq: 1, role: "user", content: "earlier", timestamp: "2026-11-23T10:00:00Z" }],
    } as unknown as HistorySnapshot);
    await flush();
    expect(navigated).toBeNull();
    expect(pool.current).toBe(fresh);
    expect(fresh.days).toEqual([]);
    expect(fresh.loading).toBe(false);
    pool.dispose();
  });

  it("a turn sent while the thread opens is held until it is open, not dropped", async () => {
    const { api, answer } = slowHistory();
    const chat = new ChatController(api, "t-open");
    const opening = chat.open("t-open");
    const sent = chat.send("hello while loading");
    await flush();
    expect(chat.agent.messages).toEqual([]);
    answer({ threadId: null, day: null, hasMore: false, messages: [] } as unknown as HistorySnapshot);
    await opening;
    await flush();
    expect(chat.agent.messages.some((m) => m.role === "user" && m.content === "hello while loading")).toBe(true);
    chat.dispose();
    await sent.catch(() => {});
  });

  it("a confirm_action the thread left pending is asked again after a reload", async () => {
    const detail: ThreadDetail = {
      threadId: "t1",
      title: "book",
      titleSet: false,
      createdAt: "2026-11-27T09:00:00Z",
      lastActiveAt: "2026-11-27T09:00:00Z",
      activeRunId: null,
      automationJobId: null,
      pendingToolCalls: [
        { toolCallId: "call-1", name: "confirm_action", arguments: '{"question":"Book it?"}', runId: "r1", askedAt: "2026-11-27T09:00:00Z" },
        { toolCallId: "call-2", name: "some_other_tool", arguments: "{}", runId: "r1", askedAt: "2026-11-27T09:00:00Z" },
      ],
    };
    const api = {
      get: async (path: string) =>
        path.startsWith("/api/v1/agent/history")
          ? { threadId: "t1", day: "2026-11-27", hasMore: false, messages: [{ id: "u1", seq: 1, role: "user", content: "book a table", attachments: [], timestamp: "" }] }
          : detail,
    } as unknown as Api;
    const chat = new ChatController(api, "t1");
    await chat.open("t1");
    expect([...chat.pendingConfirms]).toEqual(["call-1"]);
    const rows = toRows(chat.messages());
    expect(rows.map((r) => r.kind)).toEqual(["user", "tool"]);
    expect(rows[1]).toMatchObject({ kind: "tool", id: "call-1", name: "confirm_action", args: '{"question":"Book it?"}', result: null });
    chat.dispose();
  });

  it("knows the server's refusal of a second answer", () => {
    expect(refusedToolCall(new ApiError(409, "tool call call-1 was already answered"))).toBe("call-1");
    expect(refusedToolCall(new ApiError(422, "tool call call-9 is not pending in this thread"))).toBe("call-9");
    expect(refusedToolCall(new ApiError(409, "tool call call-3 is no longer pending: a later turn went on without answering it"))).toBe("call-3");
    expect(refusedToolCall(new ApiError(409, "run r1 already exists"))).toBeNull();
    expect(refusedToolCall(new Error("tool call x was already answered"))).toBeNull();
  });

  it("knows an answer that came too late", () => {
    const expired = new ApiError(409, "tool call call-2 expired");
    expect(refusedToolCall(expired)).toBe("call-2");
    expect(expiredToolCall(expired)).toBe("call-2");
    expect(expiredToolCall(new ApiError(409, "tool call call-1 was already answered"))).toBeNull();
    expect(expiredToolCall(new ApiError(422, "tool call call-2 expired"))).toBeNull();
    expect(expiredToolCall(new ApiError(409, "tool call call-2 expired yesterday, or so"))).toBeNull();
    expect(expiredToolCall(new Error("tool call call-2 expired"))).toBeNull();
  });
});

const threadWith = (pendingToolCalls: ThreadDetail["pendingToolCalls"]): ThreadDetail => ({
  threadId: "t1",
  title: "book",
  titleSet: false,
  createdAt: "2026-11-27T09:00:00Z",
  lastActiveAt: "2026-11-27T09:00:00Z",
  activeRunId: null,
  automationJobId: null,
  pendingToolCalls,
});

describe("approvals that expire", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("a card goes when its expiresAt passes, by a timer, with a line saying so", async () => {
    vi.useFakeTimers({ now: Date.parse("2026-11-28T12:00:00Z") });
    const detail = threadWith([
      { toolCallId: "soon", name: "confirm_action", arguments: "{}", runId: "r1", askedAt: "2026-11-28T11:59:58Z", expiresAt: "2026-11-28T12:00:02Z" },
      { toolCallId: "old", name: "confirm_action", arguments: "{}", runId: "r1", askedAt: "2026-11-27T09:00:00Z", expiresAt: null },
    ]);
    const asked: string[] = [];
    const api = {
      get: async (path: string) => {
        asked.push(path);
        return path.startsWith("/api/v1/agent/history") ? { threadId: "t1", day: "2026-11-28", hasMore: false, messages: [] } : detail;
      },
    } as unknown as Api;
    const chat = new ChatController(api, "t1");
    await chat.open("t1");
    expect([...chat.pendingConfirms]).toEqual(["soon", "old"]);
    expect(chat.expiries.get("soon")).toBe(Date.parse("2026-11-28T12:00:02Z"));
    expect(chat.expiries.has("old")).toBe(false);
    const reads = asked.length;
    await vi.advanceTimersByTimeAsync(1_999);
    expect(chat.pendingConfirms.has("soon")).toBe(true);
    await vi.advanceTimersByTimeAsync(1);
    expect([...chat.pendingConfirms]).toEqual(["old"]);
    expect(toRows(chat.messages()).map((r) => r.id)).toEqual(["old"]);
    expect([...chat.notices.values()]).toEqual([{ kind: "expired", text: "This approval expired; ask again." }]);
    // Nothing was asked of the server for it.
    expect(asked.length).toBe(reads);
    chat.dispose();
  });
});

/** A `fetch` that answers run posts at once and event streams as the test writes them. */
function fakeService() {
  const posts: { url: string; body: { runId: string; messages: { role: string; content: unknown }[] } }[] = [];
  const streams = new Map<string, ReadableStreamDefaultController<Uint8Array>>();
  const seq = new Map<string, number>();
  const encoder = new TextEncoder();
  const fetch = vi.fn(async (url: string, init?: RequestInit) => {
    if (init?.method === "POST") {
      const body = JSON.parse(String(init.body));
      posts.push({ url, body });
      return new Response(JSON.stringify({ taskId: "task", threadId: body.threadId, runId: body.runId, created: false }), { status: 202 });
    }
    const runId = decodeURIComponent(/runs\/([^/]+)\/events/.exec(url)![1]!);
    const stream = new ReadableStream<Uint8Array>({ start: (controller) => void streams.set(runId, controller) });
    return new Response(stream, { status: 200, headers: { "content-type": "text/event-stream" } });
  });
  return {
    fetch,
    posts,
    opened: (runId: string) => streams.has(runId),
    emit(runId: string, ...events: object[]) {
      for (const event of events) {
        const n = (seq.get(runId) ?? 0) + 1;
        seq.set(runId, n);
        streams.get(runId)!.enqueue(encoder.encode(`id: ${n}\ndata: ${JSON.stringify(event)}\n\n`));
      }
    },
    end(runId: string) {
      streams.get(runId)!.close();
    },
  };
}

async function until(ok: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!ok()) throw new Error(`timed out waiting for ${what}`);
}

describe("a turn sent while a run streams", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("is posted at once with its strategy, and followed when the run before it ends", async () => {
    const service = fakeService();
    vi.stubGlobal("fetch", service.fetch);
    const api = { headers: (extra: Record<string, string> = {}) => extra } as unknown as Api;
    const chat = new ChatController(api, "11111111-1111-4111-8111-111111111111", true);
    const first = chat.send("first");
    await until(() => service.posts.length === 1 && service.opened(service.posts[0]!.body.runId), "the first run's stream");
    const a = service.posts[0]!.body.runId;
    expect(service.posts[0]!.url).toBe("/api/v1/agent/runs");
    service.emit(
      a,
      { type: "RUN_STARTED", threadId: chat.threadId, runId: a },
      { type: "TEXT_MESSAGE_START", messageId: "m1", role: "assistant" },
      { type: "TEXT_MESSAGE_CONTENT", messageId: "m1", delta: "one two" },
    );
    await until(() => chat.agent.messages.some((m) => m.id === "m1"), "the first answer");
    expect(chat.running).toBe(true);

    // Without the user's word on the run going, nothing is sent.
    await chat.send("ignored");
    expect(service.posts.length).toBe(1);

    const second = chat.send("second", [], "interrupt");
    await until(() => service.posts.length === 2, "the second post");
    expect(service.posts[1]!.url).toBe("/api/v1/agent/runs?multitask_strategy=interrupt");
    expect(service.posts[1]!.body.messages).toEqual([expect.objectContaining({ role: "user", content: "second" })]);
    expect(chat.waiting.map((w) => [w.text, w.strategy])).toEqual([["second", "interrupt"]]);
    // Shown below the run, not in it: the run's events still land on its own messages.
    expect(chat.agent.messages.some((m) => m.role === "user" && m.content === "second")).toBe(false);

    // The server stops the first run: its stream ends cancelled.
    service.emit(
      a,
      { type: "TEXT_MESSAGE_END", messageId: "m1" },
      { type: "RUN_FINISHED", threadId: chat.threadId, runId: a, outcome: { type: "cancelled" } },
    );
    service.end(a);
    await first;
    const b = service.posts[1]!.body.runId;
    await until(() => service.opened(b), "the second run's stream");
    expect(chat.waiting).toEqual([]);
    expect(chat.running).toBe(true);
    service.emit(
      b,
      { type: "RUN_STARTED", threadId: chat.threadId, runId: b },
      { type: "TEXT_MESSAGE_START", messageId: "m2", role: "assistant" },
      { type: "TEXT_MESSAGE_CONTENT", messageId: "m2", delta: "You said: second" },
      { type: "TEXT_MESSAGE_END", messageId: "m2" },
      { type: "RUN_FINISHED", threadId: chat.threadId, runId: b, outcome: { type: "success" } },
    );
    service.end(b);
    await second;
    expect(chat.running).toBe(false);
    expect(toRows(chat.agent.messages).map((r) => (r.kind === "user" || r.kind === "assistant" ? `${r.kind}: ${r.text}` : r.kind))).toEqual([
      "user: first",
      "assistant: one two",
      "user: second",
      "assistant: You said: second",
    ]);
    expect([...chat.notices.values()]).toEqual([{ kind: "stopped", text: "Stopped." }]);
    chat.dispose();
  });
});
