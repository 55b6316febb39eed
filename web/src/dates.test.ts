import { describe, expect, it } from "vitest";
import { formatAgo, formatWhen, isIsoDateTime, isZone } from "./dates";

describe("dates", () => {
  it("knows an ISO date-time with an offset when it sees one", () => {
    expect(isIsoDateTime("2026-11-27T09:00:00+00:00")).toBe(true);
    expect(isIsoDateTime("2026-11-27T09:00:00.250Z")).toBe(true);
    expect(isIsoDateTime("2026-11-27T09:00")).toBe(false);
    expect(isIsoDateTime("2026-11-27")).toBe(false);
    expect(isIsoDateTime("9am tomorrow")).toBe(false);
  });

  it("knows IANA zones", () => {
    expect(isZone("UTC")).toBe(true);
    expect(isZone("America/Los_Angeles")).toBe(true);
    expect(isZone("Mars/Olympus")).toBe(false);
    expect(isZone("2 people")).toBe(false);
  });

  it("writes an event's start and end as one range, in the event's zone", () => {
    expect(formatWhen("2026-11-27T09:00:00+00:00", "2026-11-27T10:00:00+00:00", "en-GB", "UTC")).toBe("Fri 27 Nov, 09:00–10:00 (UTC)");
    // The same instants, read in Los Angeles, are an hour past midnight.
    expect(formatWhen("2026-11-27T09:00:00+00:00", "2026-11-27T10:00:00+00:00", "en-GB", "America/Los_Angeles")).toBe(
      "Fri 27 Nov, 01:00–02:00 (America/Los_Angeles)",
    );
    // ICU versions differ in the month's punctuation; the weekday, the hours and the zone do not.
    expect(formatWhen("2026-11-27T09:00:00+00:00", "2026-11-27T10:00:00+00:00", "zh-CN", "Asia/Shanghai")).toMatch(
      /^11.*27.*周五 17:00\s*[–至-]\s*18:00 \(Asia\/Shanghai\)$/,
    );
    expect(formatWhen("2026-11-27T09:00:00+00:00", null, "en-GB", "UTC")).toBe("Fri 27 Nov, 09:00 (UTC)");
  });

  it("says how long ago, in the reader's words", () => {
    const now = Date.parse("2026-11-27T12:00:00Z");
    expect(formatAgo("2026-11-27T11:59:40Z", now, "en")).toBe("now");
    expect(formatAgo("2026-11-27T11:55:00Z", now, "en")).toBe("5 minutes ago");
    expect(formatAgo("2026-11-27T09:00:00Z", now, "en")).toBe("3 hours ago");
    expect(formatAgo("2026-11-26T12:00:00Z", now, "en")).toBe("yesterday");
    expect(formatAgo("2026-11-26T12:00:00Z", now, "zh-CN")).toBe("昨天");
    expect(formatAgo("2026-10-01T12:00:00Z", now, "en-GB")).toBe("1 Oct");
  });
});
