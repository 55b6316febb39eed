import { describe, expect, it } from "vitest";
import { visibleRange } from "./window";

describe("windowed rows", () => {
  const heights = Array.from({ length: 10_000 }, (_, i) => (i % 3 === 0 ? 120 : 40));
  const total = heights.reduce((a, b) => a + b, 0);

  it("draws only the rows near the viewport; the spacers make up the rest", () => {
    const r = visibleRange(heights, 50_000, 800, 400, false);
    expect(r.end - r.start).toBeLessThan(60);
    expect(r.top).toBeLessThanOrEqual(50_000 - 400);
    expect(r.top + heights.slice(r.start, r.end).reduce((a, b) => a + b, 0) + r.bottom).toBe(total);
    // The viewport itself is covered.
    expect(r.top).toBeGreaterThan(50_000 - 400 - 120);
    expect(total - r.bottom).toBeGreaterThanOrEqual(50_800 + 400);
  });

  it("at the end, draws the last screenful whatever the scroll position", () => {
    const r = visibleRange(heights, 0, 800, 400, true);
    expect(r.end).toBe(10_000);
    expect(r.bottom).toBe(0);
    expect(r.end - r.start).toBeLessThan(60);
  });

  it("a short list is drawn whole", () => {
    expect(visibleRange([30, 30, 30], 0, 800, 400, false)).toEqual({ start: 0, end: 3, top: 0, bottom: 0 });
    expect(visibleRange([], 0, 800, 400, true)).toEqual({ start: 0, end: 0, top: 0, bottom: 0 });
  });
});
