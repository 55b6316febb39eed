// `forwardedProps.client_time` (docs/API.md): the device's IANA zone, its local
// time now as RFC 3339 with the offset, and the same instant in epoch ms.

export interface ClientTime {
  device_timezone: string;
  client_now_iso: string;
  client_epoch_ms: number;
}

const pad = (n: number, width = 2) => String(Math.trunc(Math.abs(n))).padStart(width, "0");

/** `date` as local RFC 3339 with its UTC offset, e.g. 2026-03-16T09:12:33-07:00. */
export function localIso(date: Date): string {
  const offset = -date.getTimezoneOffset();
  const sign = offset >= 0 ? "+" : "-";
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}` +
    `T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}` +
    `${sign}${pad(offset / 60)}:${pad(offset % 60)}`
  );
}

export function deviceTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

export function clientTime(now: Date = new Date()): ClientTime {
  return {
    device_timezone: deviceTimeZone(),
    client_now_iso: localIso(now),
    client_epoch_ms: now.getTime(),
  };
}
