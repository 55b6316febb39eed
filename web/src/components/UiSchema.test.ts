import { describe, expect, it } from "vitest";
import { describeSchedule } from "./Automations";
import { cardLocale, kvRows, parseAction, safeUrl } from "./UiSchema";

describe("UiSchema values", () => {
  it("only http(s) URLs (and absolute paths for images)", () => {
    expect(safeUrl("https://example.com/a.png", false)).toBe("https://example.com/a.png");
    expect(safeUrl("/api/v1/x", true)).toBe("/api/v1/x");
    expect(safeUrl("/api/v1/x", false)).toBeNull();
    expect(safeUrl("//evil.example/x", true)).toBeNull();
    expect(safeUrl("javascript:alert(1)", true)).toBeNull();
    expect(safeUrl("data:image/png;base64,AAAA", true)).toBeNull();
  });

  it("actions: message, link, tool; anything else is no action", () => {
    expect(parseAction({ type: "message", text: "hi" })).toEqual({ type: "message", text: "hi" });
    expect(parseAction({ type: "link", url: "https://x.example/" })).toEqual({ type: "link", url: "https://x.example/" });
    expect(parseAction({ type: "link", url: "javascript:void(0)" })).toBeNull();
    expect(parseAction({ type: "tool", name: "set_theme", args: { theme: "dark" } })).toEqual({
      type: "tool",
      name: "set_theme",
      args: { theme: "dark" },
    });
    expect(parseAction({ type: "tool", name: "x", args: [1] })).toEqual({ type: "tool", name: "x", args: {} });
    expect(parseAction({ type: "message", text: "  " })).toBeNull();
    expect(parseAction(null)).toBeNull();
  });

  it("schedules read as people say them", () => {
    expect(describeSchedule({ cron: "0 9 * * 1-5" })).toBe("cron 0 9 * * 1-5");
    expect(describeSchedule({ every_seconds: 60 })).toBe("every minute");
    expect(describeSchedule({ every_seconds: 7200 })).toBe("every 2 hours");
    expect(describeSchedule({ every_seconds: 86400 })).toBe("every day");
    expect(describeSchedule({ every_seconds: 90 })).toBe("every 90 seconds");
  });
});

describe("kv dates", () => {
  const event = [
    { label: "Start", value: "2026-11-27T09:00:00+00:00" },
    { label: "End", value: "2026-11-27T10:00:00+00:00" },
    { label: "Time zone", value: "UTC" },
  ];

  it("a start and an end become one range in the card's zone", () => {
    expect(kvRows(event, "en-GB")).toEqual([
      { label: "When", value: "Fri 27 Nov, 09:00–10:00 (UTC)", datetime: "2026-11-27T09:00:00+00:00" },
      { label: "Time zone", value: "UTC" },
    ]);
    // A card in Chinese says when in Chinese.
    expect(kvRows(event, "zh-CN")[0]!.label).toBe("时间");
  });

  it("a lone date-time is written out; other values stay as they are", () => {
    expect(kvRows([{ label: "Due", value: "2026-11-27T09:00:00Z" }, { label: "Zone", value: "Europe/Paris" }, { label: "n", value: 3 }], "en-GB")).toEqual([
      { label: "Due", value: "Fri 27 Nov, 10:00 (Europe/Paris)", datetime: "2026-11-27T09:00:00Z" },
      { label: "Zone", value: "Europe/Paris" },
      { label: "n", value: "3" },
    ]);
  });

  it("a card's locale is refined by the reader's region, never replaced by another language", () => {
    expect(cardLocale("en", "en-GB")).toBe("en-GB");
    expect(cardLocale("zh-CN", "en-GB")).toBe("zh-CN");
    expect(cardLocale("", "en-US")).toBe("en-US");
  });
});
