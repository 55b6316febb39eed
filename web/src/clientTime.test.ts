import { describe, expect, it } from "vitest";
import { clientTime, localIso } from "./clientTime";

describe("client_time", () => {
  it("is RFC 3339 with the offset, the same instant as the epoch ms", () => {
    const now = new Date("2026-03-16T16:12:33.250Z");
    const iso = localIso(now);
    expect(iso).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$/);
    expect(new Date(iso).getTime()).toBe(Math.floor(now.getTime() / 1000) * 1000);
    const time = clientTime(now);
    expect(time.client_epoch_ms).toBe(now.getTime());
    expect(time.device_timezone.length).toBeGreaterThan(0);
  });
});
