// Dates and times as people read them: in their locale, in the zone the
// event was written in. Cards carry ISO 8601 date-times (a created
// calendar event's Start and End, e.g. 2026-11-27T09:00:00+00:00) beside
// an IANA zone; lists carry RFC 3339 instants.

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)$/;

/** An ISO 8601 date-time with its offset (a bare local time is not an instant). */
export function isIsoDateTime(value: string): boolean {
  return ISO.test(value.trim()) && !Number.isNaN(Date.parse(value));
}

/** Whether `zone` is an IANA zone this runtime knows ("UTC" included). */
export function isZone(zone: string): boolean {
  if (!zone || !/^[A-Za-z_]+(?:\/[A-Za-z0-9_+-]+)*$/.test(zone)) return false;
  try {
    new Intl.DateTimeFormat("en", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

const WHEN: Intl.DateTimeFormatOptions = { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" };

/**
 * One instant, or a start–end range, in `locale` and `zone`, followed by the
 * zone's name: "Fri 27 Nov, 09:00–10:00 (UTC)" in en-GB. Without a zone the
 * reader's own is used and named by the formatter.
 */
export function formatWhen(start: string, end: string | null, locale: string, zone: string | null): string {
  const options: Intl.DateTimeFormatOptions = zone ? { ...WHEN, timeZone: zone } : { ...WHEN, timeZoneName: "short" };
  let f: Intl.DateTimeFormat;
  try {
    f = new Intl.DateTimeFormat(locale, options);
  } catch {
    f = new Intl.DateTimeFormat(undefined, options);
  }
  const a = new Date(start);
  const b = end ? new Date(end) : null;
  let text: string;
  if (b && typeof f.formatRange === "function") text = f.formatRange(a, b);
  else text = b ? `${f.format(a)} – ${f.format(b)}` : f.format(a);
  return zone ? `${text} (${zone})` : text;
}

/** "5 minutes ago", "yesterday", "3 Mar" — how long ago `iso` was, from `now`. */
export function formatAgo(iso: string, now: number, locale: string): string {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return "";
  const seconds = Math.round((then - now) / 1000);
  const rtf = new Intl.RelativeTimeFormat(locale, { numeric: "auto" });
  const abs = Math.abs(seconds);
  if (abs < 60) return rtf.format(0, "second");
  if (abs < 3600) return rtf.format(Math.round(seconds / 60), "minute");
  if (abs < 86_400) return rtf.format(Math.round(seconds / 3600), "hour");
  if (abs < 7 * 86_400) return rtf.format(Math.round(seconds / 86_400), "day");
  return new Intl.DateTimeFormat(locale, { day: "numeric", month: "short", year: abs > 300 * 86_400 ? "numeric" : undefined }).format(then);
}

/** A date and time in the reader's locale (and zone). */
export function formatDateTime(value: string | number, locale: string): string {
  return new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeStyle: "short" }).format(new Date(value));
}
