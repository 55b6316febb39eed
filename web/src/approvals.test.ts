import { describe, expect, it } from "vitest";
import { delayUntil, expiryOf, isExpired, untilText as until } from "./approvals";

describe("approvals that expire", () => {
  it("reads expiresAt, and a missing or unreadable one as none", () => {
    expect(expiryOf("2026-11-28T12:31:49.21Z")).toBe(Date.UTC(2026, 10, 28, 12, 31, 49, 210));
    expect(expiryOf(null)).toBeNull();
    expect(expiryOf(undefined)).toBeNull();
    expect(expiryOf("")).toBeNull();
    expect(expiryOf("next tuesday")).toBeNull();
  });

  it("is expired from expiresAt on, never without one", () => {
    const at = Date.UTC(2026, 10, 28, 12, 0, 0);
    expect(isExpired(at, at - 1)).toBe(false);
    expect(isExpired(at, at)).toBe(true);
    expect(isExpired(at, at + 5_000)).toBe(true);
    expect(isExpired(null, at)).toBe(false);
  });

  it("waits what is left, within what a timer can wait", () => {
    const now = Date.UTC(2026, 10, 28, 12, 0, 0);
    expect(delayUntil(now + 2_000, now)).toBe(2_000);
    expect(delayUntil(now - 2_000, now)).toBe(0);
    // 30 days is more than setTimeout can wait (it would fire at once): wait the most it can.
    expect(delayUntil(now + 30 * 86_400_000, now)).toBe(2_147_483_647);
  });

  it("says until when a card is valid as people do: a time today, a weekday this week, else a date", () => {
    const now = Date.UTC(2026, 10, 28, 9, 0, 0);
    // ICU versions differ in the space before AM/PM (U+202F or U+0020).
    const untilText = (...args: Parameters<typeof until>) => until(...args).replace(/\s/g, " ");
    expect(untilText(now + 3 * 3_600_000, now, "en-US", "UTC")).toBe("12:00 PM");
    // Minutes away: to the second.
    expect(untilText(now + 2_000, now, "en-US", "UTC")).toBe("9:00:02 AM");
    expect(untilText(now + 24 * 3_600_000, now, "en-US", "UTC")).toBe("Sun 9:00 AM");
    expect(untilText(now + 10 * 86_400_000, now, "en-US", "UTC")).toBe("Dec 8, 9:00 AM");
    expect(untilText(now + 24 * 3_600_000, now, "en-GB", "UTC")).toBe("Sun 09:00");
    // The day is the reader's: 17:00 UTC is already tomorrow in Tokyo.
    expect(untilText(now + 8 * 3_600_000, now, "en-US", "Asia/Tokyo")).toBe("Sun 2:00 AM");
  });
});
