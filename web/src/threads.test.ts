import { describe, expect, it } from "vitest";
import { merge, upsert, type Thread } from "./threads";

const thread = (threadId: string, lastActiveAt: string): Thread => ({
  threadId,
  title: threadId,
  titleSet: false,
  createdAt: "2026-11-01T00:00:00Z",
  lastActiveAt,
  activeRunId: null,
  automationJobId: null,
});

describe("the thread list", () => {
  it("a thread with new activity moves to the top, once", () => {
    const list = [thread("a", "2026-11-27T10:00:00Z"), thread("b", "2026-11-27T09:00:00Z")];
    expect(upsert(list, thread("b", "2026-11-27T11:00:00Z")).map((t) => t.threadId)).toEqual(["b", "a"]);
    expect(upsert(list, thread("c", "2026-11-27T09:30:00Z")).map((t) => t.threadId)).toEqual(["a", "c", "b"]);
  });

  it("a next page does not repeat a thread that moved up meanwhile", () => {
    const shown = [thread("b", "2026-11-27T11:00:00Z"), thread("a", "2026-11-27T10:00:00Z")];
    const next = [thread("b", "2026-11-27T08:00:00Z"), thread("c", "2026-11-27T07:00:00Z")];
    expect(merge(shown, next).map((t) => t.threadId)).toEqual(["b", "a", "c"]);
  });
});
