// A list drawn in a window: only the rows near the scroller's viewport are
// in the DOM (window.ts picks them); each drawn row's height is measured
// (ResizeObserver) and kept, so rows of any height scroll smoothly.

import type { JSX } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { visibleRange } from "../window";

export interface WindowItem {
  key: string;
  /** Drawn only while the row is in the window. */
  render(): JSX.Element;
}

/** Until a row has been drawn, it is taken to be this tall. */
const ESTIMATE = 72;
const OVERSCAN = 600;

export function Windowed({
  items,
  scroller,
  atEnd,
}: {
  items: readonly WindowItem[];
  scroller: { current: HTMLElement | null };
  /** Stuck to the bottom (read at every draw): draw the last rows and stay there. */
  atEnd: () => boolean;
}): JSX.Element {
  const heights = useRef(new Map<string, number>());
  const [view, setView] = useState({ top: 0, height: 800 });
  const [, setMeasured] = useState(0);
  const observer = useRef<ResizeObserver | null>(null);

  useEffect(() => {
    const el = scroller.current;
    if (!el) return;
    let frame = 0;
    const read = () => {
      frame = 0;
      setView((v) => (v.top === el.scrollTop && v.height === el.clientHeight ? v : { top: el.scrollTop, height: el.clientHeight }));
    };
    const onScroll = () => {
      if (!frame) frame = requestAnimationFrame(read);
    };
    read();
    el.addEventListener("scroll", onScroll, { passive: true });
    const resize = new ResizeObserver(onScroll);
    resize.observe(el);
    return () => {
      el.removeEventListener("scroll", onScroll);
      resize.disconnect();
      cancelAnimationFrame(frame);
    };
  }, [scroller]);

  // Measured heights change what is drawn: one redraw per batch of changes.
  if (!observer.current && typeof ResizeObserver === "function") {
    observer.current = new ResizeObserver((entries) => {
      let changed = false;
      for (const entry of entries) {
        const el = entry.target as HTMLElement;
        const key = el.dataset.key;
        if (!key || !el.isConnected) continue;
        const h = el.offsetHeight;
        if (heights.current.get(key) !== h) {
          heights.current.set(key, h);
          changed = true;
        }
      }
      if (changed) setMeasured((v) => v + 1);
    });
  }
  useEffect(() => () => observer.current?.disconnect(), []);

  const list = items.map((item) => heights.current.get(item.key) ?? ESTIMATE);
  const end = atEnd();
  const range = visibleRange(list, view.top, view.height, OVERSCAN, end);
  const drawn = useRef(new Set<Element>());

  // Observe what is drawn now, stop observing what left the window.
  useLayoutEffect(() => {
    const obs = observer.current;
    const el = scroller.current;
    if (!obs || !el) return;
    const now = new Set<Element>(el.querySelectorAll(":scope [data-window-row]"));
    for (const row of drawn.current) if (!now.has(row)) obs.unobserve(row);
    for (const row of now) if (!drawn.current.has(row)) obs.observe(row);
    drawn.current = now;
    if (end) el.scrollTop = el.scrollHeight;
  });

  return (
    <div class="window" data-testid="window">
      <div class="window-spacer" style={{ height: `${range.top}px` }} aria-hidden="true" />
      {items.slice(range.start, range.end).map((item) => (
        <div key={item.key} class="window-row" data-key={item.key} data-window-row="">
          {item.render()}
        </div>
      ))}
      <div class="window-spacer" style={{ height: `${range.bottom}px` }} aria-hidden="true" />
    </div>
  );
}
