// Approvals that expire: the service keeps a frontend tool call pending for
// `runs.pending_tool_call_ttl` and says until when (`expiresAt` on the
// thread's pending calls); past it the call is unlisted and its answer is
// refused (409 "tool call <id> expired"). The app drops a card when its time
// comes by a timer of its own — the server is not asked again.

/** The longest a timer can wait (2^31 − 1 ms, about 24.8 days): a longer wait fires at once. */
const MAX_DELAY = 2_147_483_647;

/** Milliseconds since the epoch of an RFC 3339 `expiresAt`; null when there is none (older calls) or it is unreadable. */
export function expiryOf(expiresAt: string | null | undefined): number | null {
  if (!expiresAt) return null;
  const at = Date.parse(expiresAt);
  return Number.isFinite(at) ? at : null;
}

export function isExpired(at: number | null, now: number): boolean {
  return at != null && now >= at;
}

/** How long to wait before looking at `at` again: what is left, within what a timer can wait. */
export function delayUntil(at: number, now: number): number {
  return Math.min(Math.max(at - now, 0), MAX_DELAY);
}

const startOfDay = (ms: number, timeZone?: string) =>
  new Intl.DateTimeFormat("en-CA", { timeZone, year: "numeric", month: "2-digit", day: "2-digit" }).format(ms);

/**
 * When a card stops being valid, as people say it: a time when it is today
 * (with seconds when that is minutes away), else a weekday, else a date.
 */
export function untilText(at: number, now: number, locale: string, timeZone?: string): string {
  const time: Intl.DateTimeFormatOptions = { hour: "numeric", minute: "2-digit", timeZone };
  if (at - now < 10 * 60_000) time.second = "2-digit";
  if (startOfDay(at, timeZone) === startOfDay(now, timeZone)) return new Intl.DateTimeFormat(locale, time).format(at);
  const day: Intl.DateTimeFormatOptions = at - now < 6 * 86_400_000 ? { weekday: "short" } : { month: "short", day: "numeric" };
  return new Intl.DateTimeFormat(locale, { ...day, ...time }).format(at);
}
