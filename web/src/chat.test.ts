import { describe, expect, it } from "vitest";
import { ApiError, type Api, type HistorySnapshot } from "./api";
import { ChatController, ChatPool, refusedToolCall } from "./chat";
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
    expect(refusedToolCall(new ApiError(409, "run r1 already exists"))).toBeNull();
    expect(refusedToolCall(new Error("tool call x was already answered"))).toBeNull();
  });
});
