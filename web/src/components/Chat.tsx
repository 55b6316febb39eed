// The chat page: the thread's days of history (older ones load as you
// scroll up), the live run below them, the turns waiting to follow it, and
// the composer.

import type { JSX } from "preact";
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Api } from "../api";
import type { BusyStrategy, ChatController, Day, Notice, Waiting } from "../chat";
import { dateLocale, lang, t } from "../i18n";
import { isFrontendTool, runSetTheme } from "../tools";
import { toRows, type Row } from "../view";
import { Composer } from "./Composer";
import { ListIcon, PlusIcon } from "./icons";
import { MemoRow, type RowActions } from "./Rows";
import { Windowed, type WindowItem } from "./Windowed";
import type { UiAction } from "./UiSchema";

/** YYYY-MM-DD of now in `zone`. */
export function today(zone: string, now = new Date()): string {
  return new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit" }).format(now);
}

function dayLabel(day: string, zone: string): string {
  const now = today(zone);
  if (day === now) return t("chat.today");
  const [y, m, d] = day.split("-").map(Number) as [number, number, number];
  const date = new Date(Date.UTC(y, m - 1, d, 12));
  const yesterday = today(zone, new Date(Date.now() - 86_400_000));
  if (day === yesterday) return t("chat.yesterday");
  return new Intl.DateTimeFormat(dateLocale(), { weekday: "long", month: "long", day: "numeric", timeZone: "UTC" }).format(date);
}

/** A day's rows, worked out once per loaded day (a 10,000-message day is not re-read per frame). */
const dayRows = new WeakMap<readonly unknown[], Row[]>();
function rowsOf(messages: Day["messages"]): Row[] {
  let rows = dayRows.get(messages);
  if (!rows) {
    rows = toRows(messages);
    dayRows.set(messages, rows);
  }
  return rows;
}

function DaySeparator({ day, zone }: { day: string; zone: string }): JSX.Element {
  const label = dayLabel(day, zone);
  return (
    <div class="day" role="separator" aria-label={label} data-testid="day" data-day={day}>
      <span>{label}</span>
    </div>
  );
}

function Progress({ step, reconnecting }: { step: string | null; reconnecting: boolean }): JSX.Element {
  const label = reconnecting
    ? t("progress.reconnecting")
    : step === "router"
      ? t("progress.router")
      : step === "worker"
        ? t("progress.worker")
        : t("progress.starting");
  return (
    <div class="progress" role="status" data-testid="progress" data-step={step ?? ""}>
      <span class="dots" aria-hidden="true">
        <i />
        <i />
        <i />
      </span>
      <span>{label}</span>
      {step && !reconnecting && (
        <span class="steps" aria-hidden="true">
          <span class={step === "router" ? "on" : "done"}>router</span> → <span class={step === "worker" ? "on" : ""}>worker</span>
        </span>
      )}
    </div>
  );
}

/** A turn sent while the run goes: shown below it, as the server holds it, until it runs. */
function WaitingRow({ waiting }: { waiting: Waiting }): JSX.Element {
  return (
    <div class="row row-user row-waiting" data-testid="waiting-message" data-strategy={waiting.strategy}>
      <div class="bubble bubble-user">
        {waiting.text && <div class="bubble-text">{waiting.text}</div>}
        {waiting.images > 0 && <div class="muted small">{t("chat.waitingImages", { n: waiting.images })}</div>}
      </div>
      <div class="waiting-tag" role="status">
        {waiting.strategy === "interrupt" ? t("chat.interrupting") : t("chat.queued")}
      </div>
    </div>
  );
}

function NoticeRow({ notice }: { notice: Notice }): JSX.Element {
  return (
    <div class={`notice notice-${notice.kind}`} role={notice.kind === "error" ? "alert" : "status"} data-testid={`notice-${notice.kind}`}>
      {notice.kind === "error" ? <strong>{t("chat.error")}</strong> : null}
      {notice.text}
    </div>
  );
}

export interface ChatProps {
  api: Api;
  chat: ChatController;
  zone: string;
  /** The thread's title in the list ("" when it has none yet). */
  title: string;
  onNewThread(): void;
  /** Opens the thread list (a sheet on narrow screens). */
  onOpenThreads(opener: HTMLElement): void;
}

export function Chat({ api, chat, zone, title, onNewThread, onOpenThreads }: ChatProps): JSX.Element {
  const [, setVersion] = useState(0);
  useEffect(() => {
    const off = chat.subscribe(() => setVersion((v) => v + 1));
    // What changed between this render and the subscription (a thread's
    // history can arrive first) would otherwise never be drawn.
    setVersion((v) => v + 1);
    return off;
  }, [chat]);

  const scroller = useRef<HTMLDivElement>(null);
  const sentinel = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const restore = useRef<number | null>(null);

  const onAction = useCallback(
    (action: UiAction) => {
      if (action.type === "message") void chat.send(action.text);
      else if (action.type === "link") window.open(action.url, "_blank", "noopener,noreferrer");
      else if (isFrontendTool(action.name) && action.name === "set_theme") runSetTheme(action.args);
      else void chat.send(`Please run ${action.name} with ${JSON.stringify(action.args)}`);
    },
    [chat],
  );
  const onConfirm = useCallback((id: string, approved: boolean) => void chat.confirm(id, approved), [chat]);
  const actions: RowActions = useMemo(
    () => ({ onAction, onConfirm, pending: new Set(chat.pendingConfirms), expiries: new Map(chat.expiries), busy: chat.busy, lang: lang() }),
    // A new object when what rows read from it changes.
    [onAction, onConfirm, chat.busy, [...chat.pendingConfirms].join(), [...chat.expiries].join(), lang()],
  );

  const loadOlder = useCallback(async () => {
    const el = scroller.current;
    if (!el || chat.loadingOlder || !chat.hasMore) return;
    const before = el.scrollHeight - el.scrollTop;
    if (await chat.loadOlder()) restore.current = before;
  }, [chat]);

  // Scrolling up to the top loads the previous day.
  useEffect(() => {
    const el = sentinel.current;
    const root = scroller.current;
    if (!el || !root) return;
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting) && !stick.current) void loadOlder();
    }, { root, rootMargin: "200px 0px 0px 0px" });
    observer.observe(el);
    return () => observer.disconnect();
  }, [loadOlder, chat.hasMore, chat.days.length]);

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    if (restore.current != null) {
      el.scrollTop = el.scrollHeight - restore.current;
      restore.current = null;
    } else if (stick.current) {
      el.scrollTop = el.scrollHeight;
    }
  });

  const onScroll = () => {
    const el = scroller.current;
    if (el) stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  };

  const send = useCallback(
    (text: string, images: Parameters<ChatController["send"]>[1], strategy?: BusyStrategy) => {
      stick.current = true;
      void chat.send(text, images, strategy);
    },
    [chat],
  );

  const now = today(zone);
  const live = toRows(chat.agent.messages);
  const lastDay = chat.days.length ? chat.days[chat.days.length - 1]!.day : null;
  const notices = [...chat.notices.entries()].sort((a, b) => a[0] - b[0]);
  // History and the live run as one list of rows, drawn in a window.
  const items: WindowItem[] = [];
  for (const day of chat.days) {
    items.push({ key: `day:${day.day}`, render: () => <DaySeparator day={day.day} zone={zone} /> });
    for (const row of rowsOf(day.messages)) items.push({ key: `${row.kind}:${row.id}`, render: () => <MemoRow row={row} actions={actions} /> });
  }
  const liveItems: WindowItem[] = [];
  let n = 0;
  const flushNotices = (upTo: number) => {
    while (n < notices.length && notices[n]![0] <= upTo) {
      const [at, notice] = notices[n]!;
      liveItems.push({ key: `notice-${at}`, render: () => <NoticeRow notice={notice} /> });
      n++;
    }
  };
  for (const row of live) {
    flushNotices(row.at);
    liveItems.push({ key: `${row.kind}:${row.id}`, render: () => <MemoRow row={row} actions={actions} /> });
  }
  flushNotices(Number.POSITIVE_INFINITY);
  if (liveItems.length > 0 && lastDay !== null && lastDay !== now) {
    items.push({
      key: "day:live",
      render: () => (
        <div class="day" role="separator" aria-label={t("chat.today")}>
          <span>{t("chat.today")}</span>
        </div>
      ),
    });
  }
  items.push(...liveItems);

  const empty = !chat.loading && chat.days.length === 0 && live.length === 0 && liveItems.length === 0;

  return (
    <div class="chat">
      <header class="page-head">
        <button
          type="button"
          class="icon-btn threads-toggle"
          aria-label={t("threads.open")}
          title={t("threads.open")}
          onClick={(e) => onOpenThreads(e.currentTarget as HTMLElement)}
          data-testid="threads-toggle"
        >
          <ListIcon />
        </button>
        <h1>
          {t("chat.title")}
          {title && <span class="chat-thread-title"> · {title}</span>}
        </h1>
        <button type="button" class="btn btn-secondary" onClick={onNewThread} data-testid="new-thread">
          <PlusIcon /> <span class="btn-label">{t("chat.newThread")}</span>
        </button>
      </header>
      {/* Focusable: a conversation of text alone has nothing else to take focus, and keys must scroll it too. */}
      <div class="scroller" ref={scroller} onScroll={onScroll} tabIndex={0}>
        <div class="log" role="log" aria-label={t("chat.log")} aria-busy={chat.running} data-testid="log">
          <div ref={sentinel} class="sentinel" />
          {chat.hasMore && (
            <button type="button" class="older" onClick={() => void loadOlder()} disabled={chat.loadingOlder} data-testid="load-older">
              {chat.loadingOlder ? t("chat.loading") : t("chat.older")}
            </button>
          )}
          {chat.loading && <div class="muted center">{t("chat.loading")}</div>}
          {chat.loadError && (
            <div class="notice notice-error" role="alert">
              {chat.loadError}
            </div>
          )}
          {empty && (
            <div class="empty" data-testid="empty">
              <div class="empty-title">{t("chat.emptyTitle")}</div>
              <div class="muted">{t("chat.emptyHelp")}</div>
            </div>
          )}
          <Windowed items={items} scroller={scroller} atEnd={() => stick.current && restore.current == null} />
          {chat.running && <Progress step={chat.step} reconnecting={chat.reconnecting} />}
          {chat.waiting.map((w) => (
            <WaitingRow key={w.id} waiting={w} />
          ))}
        </div>
      </div>
      <Composer api={api} loading={chat.loading || chat.syncing} running={chat.busy} stopping={chat.stopping} onSend={send} onStop={() => void chat.stop()} />
    </div>
  );
}
