// Which rows of a long list to draw: those within `overscan` pixels of the
// viewport, from each row's measured height (or an estimate until it has
// been drawn once). Everything above and below is one spacer each, so a
// 10,000-message thread puts a few dozen rows in the DOM.

export interface Range {
  /** First row drawn. */
  start: number;
  /** One past the last row drawn. */
  end: number;
  /** Height of the rows above `start` (the top spacer). */
  top: number;
  /** Height of the rows from `end` on (the bottom spacer). */
  bottom: number;
}

export function visibleRange(heights: readonly number[], scrollTop: number, viewport: number, overscan: number, atEnd: boolean): Range {
  const n = heights.length;
  let total = 0;
  for (const h of heights) total += h;
  // Stuck to the end (a thread just opened, a run streaming): draw the last
  // screenful whatever scrollTop says, so the first paint is the bottom.
  const from = atEnd ? Math.max(0, total - viewport) - overscan : scrollTop - overscan;
  const to = atEnd ? total : scrollTop + viewport + overscan;
  let start = 0;
  let top = 0;
  while (start < n && top + heights[start]! <= from) top += heights[start++]!;
  let end = start;
  let y = top;
  while (end < n && y < to) y += heights[end++]!;
  return { start, end, top, bottom: total - y };
}
