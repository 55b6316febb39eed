// The shell: finds out whether the server wants a token (a 401 from
// /api/v1/me/profile), asks for one if so, then shows the navigation and
// the page the URL's hash names (#/chat[/threadId], #/calendar,
// #/automations[/id]); on the chat page, the thread list beside the thread.

import type { JSX } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { Api, ApiError, tokenStore, type Profile } from "../api";
import { ChatPool, freshThreads, uuid, type ChatController } from "../chat";
import { LANGS, LANG_EVENT, applyLang, lang, t, type Lang } from "../i18n";
import { ThreadList, type Thread } from "../threads";
import { THEME_EVENT, applyTheme, storedTheme, type Theme } from "../tools";
import { Automations } from "./Automations";
import { Calendar } from "./Calendar";
import { Chat } from "./Chat";
import { BoltIcon, CalendarIcon, ChatIcon, CloseIcon, LogoutIcon, MoonIcon, SunIcon } from "./icons";
import { DeleteDialog, Modal, Threads } from "./Threads";

type Route = { page: "chat"; threadId: string | null } | { page: "calendar" } | { page: "automations"; jobId: string | null };

export function route(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/");
  if (parts[0] === "calendar") return { page: "calendar" };
  if (parts[0] === "automations") return { page: "automations", jobId: parts[1] ? decodeURIComponent(parts[1]) : null };
  return { page: "chat", threadId: parts[0] === "chat" && parts[1] ? decodeURIComponent(parts[1]) : null };
}

const chatHash = (threadId: string) => `#/chat/${encodeURIComponent(threadId)}`;

function useRoute(): Route {
  const [current, setCurrent] = useState(() => route(location.hash));
  useEffect(() => {
    const on = () => setCurrent(route(location.hash));
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return current;
}

type Session = { state: "checking" } | { state: "token"; error: string | null } | { state: "ready"; profile: Profile } | { state: "down"; error: string };

/** Redraws the caller when the language changes. */
function useLang(): Lang {
  const [current, setCurrent] = useState(lang());
  useEffect(() => {
    const on = () => setCurrent(lang());
    addEventListener(LANG_EVENT, on);
    return () => removeEventListener(LANG_EVENT, on);
  }, []);
  return current;
}

function LanguagePicker(): JSX.Element {
  const current = useLang();
  return (
    <select
      class="lang-select"
      aria-label={t("nav.language")}
      title={t("nav.language")}
      value={current}
      onChange={(e) => applyLang((e.currentTarget as HTMLSelectElement).value as Lang, true)}
      data-testid="language"
    >
      {LANGS.map((l) => (
        <option key={l.lang} value={l.lang} lang={l.lang}>
          {l.name}
        </option>
      ))}
    </select>
  );
}

export function App(): JSX.Element {
  useLang();
  const api = useMemo(() => new Api(tokenStore.get()), []);
  const [session, setSession] = useState<Session>({ state: "checking" });

  const check = async () => {
    const hadToken = Boolean(api.token);
    try {
      const profile = await api.get<Profile>("/api/v1/me/profile");
      setSession({ state: "ready", profile });
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) {
        api.token = null;
        tokenStore.set(null);
        setSession({ state: "token", error: hadToken ? t("gate.refused", { detail: e.detail }) : null });
      } else {
        setSession({ state: "down", error: e instanceof Error ? e.message : String(e) });
      }
    }
  };

  useEffect(() => {
    api.onUnauthorized = () => {
      api.token = null;
      tokenStore.set(null);
      setSession({ state: "token", error: t("gate.expired") });
    };
    void check();
  }, [api]);

  if (session.state === "checking") return <div class="splash" aria-busy="true" />;
  if (session.state === "down") {
    return (
      <main class="gate">
        <div class="gate-card">
          <h1>agwire</h1>
          <p class="error-text" role="alert">
            {t("gate.down", { error: session.error })}
          </p>
          <button type="button" class="btn btn-primary" onClick={() => void check()}>
            {t("gate.retry")}
          </button>
        </div>
      </main>
    );
  }
  if (session.state === "token") {
    return (
      <TokenGate
        error={session.error}
        onToken={(token) => {
          api.token = token;
          tokenStore.set(token);
          setSession({ state: "checking" });
          void check();
        }}
      />
    );
  }
  return (
    <Shell
      api={api}
      profile={session.profile}
      onProfile={(profile) => setSession({ state: "ready", profile })}
      onSignOut={
        api.token
          ? () => {
              api.token = null;
              tokenStore.set(null);
              setSession({ state: "token", error: null });
            }
          : null
      }
    />
  );
}

function TokenGate({ error, onToken }: { error: string | null; onToken(token: string): void }): JSX.Element {
  const [value, setValue] = useState("");
  return (
    <main class="gate">
      <form
        class="gate-card"
        onSubmit={(e) => {
          e.preventDefault();
          const token = value.trim().replace(/^Bearer\s+/i, "");
          if (token) onToken(token);
        }}
        aria-labelledby="gate-title"
      >
        <h1 id="gate-title">{t("gate.title")}</h1>
        <p class="muted">{t("gate.help")}</p>
        <label for="token">{t("gate.token")}</label>
        <textarea
          id="token"
          rows={4}
          value={value}
          onInput={(e) => setValue((e.currentTarget as HTMLTextAreaElement).value)}
          spellcheck={false}
          autocomplete="off"
          data-testid="token-input"
          autoFocus
        />
        {error && (
          <p class="error-text" role="alert" data-testid="token-error">
            {error}
          </p>
        )}
        <button type="submit" class="btn btn-primary" disabled={!value.trim()}>
          {t("gate.continue")}
        </button>
      </form>
    </main>
  );
}

function Shell({
  api,
  profile,
  onProfile,
  onSignOut,
}: {
  api: Api;
  profile: Profile;
  onProfile(profile: Profile): void;
  onSignOut: (() => void) | null;
}): JSX.Element {
  const current = useRoute();
  const [theme, setTheme] = useState<Theme>(storedTheme());
  const threads = useMemo(() => new ThreadList(api), [api]);
  const [, redraw] = useState(0);
  const pool = useMemo(
    () =>
      new ChatPool(api, (threadId) => {
        // A run started or ended: the thread moves up and shows (or stops
        // showing) it. A thread whose first run was refused is still not on
        // the server: nothing to read (a 404).
        if (!freshThreads.has(threadId)) void threads.touch(threadId);
        redraw((v) => v + 1);
      }),
    [api, threads],
  );
  const [chat, setChat] = useState<ChatController | null>(null);
  const [sheet, setSheet] = useState(false);
  const sheetOpener = useRef<HTMLElement | null>(null);
  const [deleting, setDeleting] = useState<{ thread: Thread; opener: HTMLElement } | null>(null);
  useEffect(() => {
    // The header shows the current thread's title from the list.
    const off = threads.subscribe(() => redraw((v) => v + 1));
    void threads.refresh();
    return () => {
      off();
      pool.dispose();
    };
  }, [pool]);
  const chatThread = current.page === "chat" ? current.threadId : undefined;
  useEffect(() => {
    if (chatThread === undefined) return;
    if (chatThread) setChat(pool.show(chatThread, freshThreads.has(chatThread)));
    // #/chat: the thread shown last, else the latest (then its own URL).
    else if (pool.current) location.replace(chatHash(pool.current.threadId));
    else {
      // Only while the page is still the one that asked for it: a thread
      // opened or made meanwhile (a New thread click before the route's
      // effect ran) is not taken back.
      const asked = location.hash;
      setChat(
        pool.showLatest((opened) => {
          if (location.hash === asked) location.replace(chatHash(opened.threadId));
        }),
      );
    }
  }, [chatThread]);
  const newThread = () => {
    const id = uuid();
    freshThreads.set(id, true);
    location.hash = chatHash(id);
  };
  const running = new Set(pool.live().filter((c) => c.busy).map((c) => c.threadId));
  useEffect(() => {
    const on = () => setTheme(storedTheme());
    addEventListener(THEME_EVENT, on);
    return () => removeEventListener(THEME_EVENT, on);
  }, []);
  // History days are the server's: in the profile's zone, else UTC.
  const dayZone = typeof profile.settings.timezone === "string" && profile.settings.timezone ? profile.settings.timezone : "UTC";
  const dark = theme === "dark" || (theme === "system" && matchMedia("(prefers-color-scheme: dark)").matches);
  const link = (page: Route["page"], label: string, icon: JSX.Element) => (
    <a href={page === "chat" && pool.current ? chatHash(pool.current.threadId) : `#/${page}`} class={`nav-link${current.page === page ? " active" : ""}`} aria-current={current.page === page ? "page" : undefined}>
      {icon}
      <span>{label}</span>
    </a>
  );
  return (
    <div class="shell">
      <a
        href="#/chat"
        class="skip-link"
        onClick={(e) => {
          const box = document.getElementById("message");
          if (box) {
            e.preventDefault();
            box.focus();
          }
        }}
      >
        {t("nav.skip")}
      </a>
      <nav class="nav" aria-label={t("nav.main")}>
        <div class="brand">
          <span class="brand-mark" aria-hidden="true" />
          <span class="brand-name">agwire</span>
        </div>
        <div class="nav-links">
          {link("chat", t("nav.chat"), <ChatIcon />)}
          {link("calendar", t("nav.calendar"), <CalendarIcon />)}
          {link("automations", t("nav.automations"), <BoltIcon />)}
        </div>
        <div class="nav-tools">
          <LanguagePicker />
          <button
            type="button"
            class="icon-btn"
            aria-label={dark ? t("nav.toLight") : t("nav.toDark")}
            title={t("nav.theme")}
            onClick={() => {
              const next: Theme = dark ? "light" : "dark";
              applyTheme(next);
            }}
          >
            {dark ? <SunIcon /> : <MoonIcon />}
          </button>
          {onSignOut && (
            <button type="button" class="icon-btn" aria-label={t("nav.signOut")} title={t("nav.signOut")} onClick={onSignOut}>
              <LogoutIcon />
            </button>
          )}
        </div>
      </nav>
      <main class="main" id="main">
        {current.page === "chat" && (
          <div class="chat-page">
            <nav class="threads-side" aria-label={t("threads.title")}>
              <Threads
                list={threads}
                currentId={chat?.threadId ?? null}
                running={running}
                idPrefix="side"
                onDelete={(thread, opener) => setDeleting({ thread, opener })}
              />
            </nav>
            {chat && (
              <Chat
                key={chat.key}
                api={api}
                chat={chat}
                zone={dayZone}
                title={threads.threads.find((th) => th.threadId === chat.threadId)?.title ?? ""}
                onNewThread={newThread}
                onOpenThreads={(opener) => {
                  sheetOpener.current = opener;
                  setSheet(true);
                }}
              />
            )}
          </div>
        )}
        {current.page === "calendar" && <Calendar api={api} profile={profile} onProfile={onProfile} />}
        {current.page === "automations" && <Automations api={api} jobId={current.jobId} />}
      </main>
      <Modal open={sheet} labelledBy="sheet-threads-title" onClose={() => setSheet(false)} opener={sheetOpener.current} className="sheet" testId="threads-sheet">
        <button type="button" class="icon-btn sheet-close" aria-label={t("threads.close")} onClick={() => setSheet(false)}>
          <CloseIcon />
        </button>
        {sheet ? (
          <Threads
            list={threads}
            currentId={chat?.threadId ?? null}
            running={running}
            idPrefix="sheet"
            onPick={() => setSheet(false)}
            onDelete={(thread, opener) => {
              setSheet(false);
              setDeleting({ thread, opener });
            }}
          />
        ) : (
          <></>
        )}
      </Modal>
      <DeleteDialog
        thread={deleting?.thread ?? null}
        opener={deleting?.opener ?? null}
        onCancel={() => setDeleting(null)}
        remove={async (thread) => {
          await threads.remove(thread.threadId);
          pool.forget(thread.threadId);
        }}
        onDeleted={(thread) => {
          setDeleting(null);
          if (chat?.threadId !== thread.threadId) return;
          // The newest thread left, else a new one.
          const next = threads.threads[0];
          if (next) location.hash = chatHash(next.threadId);
          else newThread();
        }}
      />
    </div>
  );
}
