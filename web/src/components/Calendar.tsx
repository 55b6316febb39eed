// The calendar: the user's events (GET /api/v1/calendar/events) as an
// agenda grouped by day, in the user's time zone — the profile's, else this
// device's — which is edited here (PATCH /api/v1/me/profile).

import type { JSX } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { ApiError, type Api, type CalendarEvent, type Profile } from "../api";
import { deviceTimeZone, localIso } from "../clientTime";
import { dateLocale, t } from "../i18n";
import { today } from "./Chat";

const DAY_MS = 86_400_000;
const WINDOW_DAYS = 30;

function zones(): string[] {
  const intl = Intl as unknown as { supportedValuesOf?: (key: string) => string[] };
  try {
    return intl.supportedValuesOf?.("timeZone") ?? [];
  } catch {
    return [];
  }
}

function startOfLocalDay(date: Date): Date {
  return new Date(date.getFullYear(), date.getMonth(), date.getDate());
}

export interface CalendarProps {
  api: Api;
  profile: Profile;
  onProfile(profile: Profile): void;
}

export function Calendar({ api, profile, onProfile }: CalendarProps): JSX.Element {
  const device = deviceTimeZone();
  const zone = typeof profile.settings.timezone === "string" && profile.settings.timezone ? profile.settings.timezone : device;
  const [from, setFrom] = useState(() => startOfLocalDay(new Date()));
  const [events, setEvents] = useState<CalendarEvent[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    const controller = new AbortController();
    const to = new Date(from.getTime() + WINDOW_DAYS * DAY_MS);
    const query = new URLSearchParams({ from: localIso(from), to: localIso(to) });
    setEvents(null);
    api
      .get<{ events: CalendarEvent[] }>(`/api/v1/calendar/events?${query}`, controller.signal)
      .then((body) => {
        setEvents(body.events);
        setError(null);
      })
      .catch((e: unknown) => {
        if ((e as Error).name !== "AbortError") setError(e instanceof ApiError ? e.detail : String(e));
      });
    return () => controller.abort();
  }, [api, from]);

  const days = useMemo(() => {
    const byDay = new Map<string, CalendarEvent[]>();
    for (const event of events ?? []) {
      const day = today(zone, new Date(event.start_utc));
      byDay.set(day, [...(byDay.get(day) ?? []), event]);
    }
    return [...byDay.entries()].sort(([a], [b]) => a.localeCompare(b));
  }, [events, zone]);

  const time = new Intl.DateTimeFormat(dateLocale(), { hour: "2-digit", minute: "2-digit", timeZone: zone });
  const dayTitle = new Intl.DateTimeFormat(dateLocale(), { weekday: "long", month: "long", day: "numeric", timeZone: zone });
  const range = new Intl.DateTimeFormat(dateLocale(), { month: "short", day: "numeric" });
  const to = new Date(from.getTime() + (WINDOW_DAYS - 1) * DAY_MS);

  return (
    <div class="page">
      <header class="page-head">
        <h1>{t("nav.calendar")}</h1>
      </header>
      <div class="page-body">
        <ZoneForm api={api} zone={zone} device={device} explicit={Boolean(profile.settings.timezone)} onProfile={onProfile} />
        <div class="range" role="group" aria-label={t("cal.range")}>
          <button type="button" class="btn btn-secondary" onClick={() => setFrom(new Date(from.getTime() - WINDOW_DAYS * DAY_MS))}>
            {t("cal.earlier")}
          </button>
          <span class="range-label">
            {range.format(from)} – {range.format(to)}
          </span>
          <button type="button" class="btn btn-secondary" onClick={() => setFrom(new Date(from.getTime() + WINDOW_DAYS * DAY_MS))}>
            {t("cal.later")}
          </button>
        </div>
        {error && (
          <div class="notice notice-error" role="alert">
            {error}
          </div>
        )}
        {events === null && !error && <div class="muted">{t("chat.loading")}</div>}
        {events !== null && events.length === 0 && (
          <div class="empty small" data-testid="calendar-empty">
            {t("cal.empty", { n: WINDOW_DAYS })}
          </div>
        )}
        <ol class="agenda" aria-label={t("cal.events")}>
          {days.map(([day, list]) => (
            <li key={day} class="agenda-day">
              <h2 class="agenda-date">{dayTitle.format(new Date(list[0]!.start_utc))}</h2>
              <ul>
                {list.map((e) => (
                  <li key={e.id} class="event" data-testid="calendar-event">
                    <span class="event-time">
                      {time.format(new Date(e.start_utc))} – {time.format(new Date(e.end_utc))}
                    </span>
                    <span class="event-title">{e.title}</span>
                    {e.event_timezone !== zone && (
                      <span class="event-zone">
                        {e.start.slice(11, 16)} {e.event_timezone}
                      </span>
                    )}
                  </li>
                ))}
              </ul>
            </li>
          ))}
        </ol>
      </div>
    </div>
  );
}

function ZoneForm({
  api,
  zone,
  device,
  explicit,
  onProfile,
}: {
  api: Api;
  zone: string;
  device: string;
  explicit: boolean;
  onProfile(profile: Profile): void;
}): JSX.Element {
  const [value, setValue] = useState(zone);
  const [state, setState] = useState<{ kind: "idle" | "saving" | "saved" } | { kind: "error"; text: string }>({ kind: "idle" });
  const all = useMemo(zones, []);
  useEffect(() => setValue(zone), [zone]);

  const save = async (timezone: string | null) => {
    setState({ kind: "saving" });
    try {
      const profile = await api.json<Profile>("PATCH", "/api/v1/me/profile", { settings: { timezone } });
      onProfile(profile);
      setState({ kind: "saved" });
    } catch (e) {
      setState({ kind: "error", text: e instanceof ApiError ? e.detail : String(e) });
    }
  };

  return (
    <form
      class="zone-form"
      onSubmit={(e) => {
        e.preventDefault();
        void save(value.trim());
      }}
    >
      <label for="timezone">{t("cal.zone")}</label>
      <div class="zone-row">
        <input
          id="timezone"
          list="timezones"
          value={value}
          onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)}
          autocomplete="off"
          spellcheck={false}
          data-testid="timezone-input"
        />
        <datalist id="timezones">
          {all.map((z) => (
            <option key={z} value={z} />
          ))}
        </datalist>
        <button type="submit" class="btn btn-primary" disabled={state.kind === "saving" || !value.trim() || (value === zone && explicit)}>
          {t("cal.save")}
        </button>
      </div>
      <div class="zone-help muted" aria-live="polite">
        {state.kind === "error" ? (
          <span class="error-text" role="alert">
            {state.text}
          </span>
        ) : state.kind === "saved" ? (
          t("cal.saved")
        ) : (
          <>
            {explicit ? t("cal.explicit") : t("cal.notSet")}{" "}
            {(zone !== device || !explicit) && (
              <button type="button" class="link" onClick={() => void save(device)}>
                {t("cal.useDevice", { zone: device })}
              </button>
            )}
          </>
        )}
      </div>
    </form>
  );
}
