import type { Message } from "@ag-ui/client";
import { describe, expect, it } from "vitest";
import { fromHistory, sameRow, toRows } from "./view";

describe("history as AG-UI messages", () => {
  it("a user turn with images and an answer with a card become what a live run makes", () => {
    const schema = { version: "2.0", status: "success", root: { type: "text", content: "hi" } };
    const messages = fromHistory([
      {
        id: "u1",
        seq: 1,
        role: "user",
        content: "look",
        attachments: [{ mimeType: "image/png", url: "https://h/a?sig=1" }],
        timestamp: "2026-03-15T10:00:00Z",
      },
      { id: "a1", seq: 2, role: "assistant", content: "Nice.", ui_schema: schema, timestamp: "2026-03-15T10:00:05Z" },
      { id: "a2", seq: 3, role: "assistant", content: "", ui_schema: null, timestamp: "2026-03-15T10:00:06Z" },
    ]);
    expect(messages).toEqual([
      {
        id: "u1",
        role: "user",
        content: [
          { type: "text", text: "look" },
          { type: "image", source: { type: "url", value: "https://h/a?sig=1", mimeType: "image/png" } },
        ],
      },
      { id: "a1", role: "assistant", content: "Nice." },
      { id: "a1:ui", role: "activity", activityType: "ui_schema", content: schema },
    ]);
    expect(toRows(messages).map((r) => r.kind)).toEqual(["user", "assistant", "card"]);
    expect(toRows(messages)[0]).toMatchObject({ images: [{ url: "https://h/a?sig=1" }], text: "look" });
  });
});

describe("rows", () => {
  const live: Message[] = [
    { id: "u", role: "user", content: "time?" },
    { id: "r", role: "reasoning", content: "think" },
    {
      id: "a",
      role: "assistant",
      content: "",
      toolCalls: [{ id: "c1", type: "function", function: { name: "get_current_time", arguments: "{}" } }],
    },
    { id: "t", role: "tool", toolCallId: "c1", content: '{"now":"x"}' },
    { id: "a2", role: "assistant", content: "It is x." },
  ];

  it("fold a tool's result into its call and keep the order", () => {
    const rows = toRows(live);
    expect(rows.map((r) => `${r.kind}@${r.at}`)).toEqual(["user@0", "reasoning@1", "tool@2", "assistant@4"]);
    expect(rows[2]).toMatchObject({ name: "get_current_time", args: "{}", result: '{"now":"x"}', error: null });
  });

  it("compare by what they draw", () => {
    const [a] = toRows([{ id: "m", role: "assistant", content: "Hel" }]);
    const [b] = toRows([{ id: "m", role: "assistant", content: "Hello" }]);
    const [c] = toRows([{ id: "m", role: "assistant", content: "Hello" }]);
    expect(sameRow(a!, b!)).toBe(false);
    expect(sameRow(b!, c!)).toBe(true);
  });
});
