import { describe, expect, it } from "vitest";
import type { Api, HistorySnapshot } from "./api";
import { ChatController } from "./chat";

/** An Api whose history answer the test releases when it wants. */
function slowHistory(): { api: Api; answer: (snapshot: HistorySnapshot) => void } {
  let answer: (snapshot: HistorySnapshot) => void = () => {};
  const pending = new Promise<HistorySnapshot>((resolve) => {
    answer = resolve;
  });
  const api = { get: () => pending } as unknown as Api;
  return { api, answer: (snapshot) => answer(snapshot) };
}

describe("the chat's thread", () => {
  it("a new thread opened while the latest one loads stays open", async () => {
    const { api, answer } = slowHistory();
    const chat = new ChatController(api);
    const opening = chat.open();
    chat.newThread();
    const fresh = chat.threadId;
    answer({
      threadId: "older-thread",
      day: "2026-11-23",
      hasMore: false,
      messages: [{ id: "u1", seq: 1, role: "user", content: "earlier", timestamp: "2026-11-23T10:00:00Z" }],
    } as unknown as HistorySnapshot);
    await opening;
    expect(chat.threadId).toBe(fresh);
    expect(chat.days).toEqual([]);
    expect(chat.loading).toBe(false);
    chat.dispose();
  });
});
