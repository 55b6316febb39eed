// The shell: finds out whether the server wants a token (a 401 from
// /api/v1/me/profile), asks for one if so, then shows the navigation and
// the page the URL's hash names (#/chat, #/calendar, #/automations[/id]).

import type { JSX } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { Api, ApiError, tokenStore, type Profile } from "../api";
import { ChatController } from "../chat";
import { LANGS, LANG_EVENT, applyLang, lang, t, type Lang } from "../i18n";
import { THEME_EVENT, applyTheme, storedTheme, type Theme } from "../tools";
import { Automations } from "./Automations";
import { Calendar } from "./Calendar";
import { Chat } from "./Chat";
import { BoltIcon, CalendarIcon, ChatIcon, LogoutIcon, MoonIcon, SunIcon } from "./icons";

type Route = { page: "chat" } | { page: "calendar" } | { page: "automations"; jobId: string | null };

function route(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/");
  if (parts[0] === "calendar") return { page: "calendar" };
  if (parts[0] === "automations") return { page: "automations", jobId: parts[1] ? decodeURIComponent(parts[1]) : null };
  return { page: "chat" };
}

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
  const chat = useMemo(() => new ChatController(api), [api]);
  useEffect(() => {
    void chat.open();
    return () => chat.dispose();
  }, [chat]);
  useEffect(() => {
    const on = () => setTheme(storedTheme());
    addEventListener(THEME_EVENT, on);
    return () => removeEventListener(THEME_EVENT, on);
  }, []);
  // History days are the server's: in the profile's zone, else UTC.
  const dayZone = typeof profile.settings.timezone === "string" && profile.settings.timezone ? profile.settings.timezone : "UTC";
  const dark = theme === "dark" || (theme === "system" && matchMedia("(prefers-color-scheme: dark)").matches);
  const link = (page: Route["page"], label: string, icon: JSX.Element) => (
    <a href={`#/${page}`} class={`nav-link${current.page === page ? " active" : ""}`} aria-current={current.page === page ? "page" : undefined}>
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
        <div class="brand" aria-label="agwire">
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
        {current.page === "chat" && <Chat api={api} chat={chat} zone={dayZone} />}
        {current.page === "calendar" && <Calendar api={api} profile={profile} onProfile={onProfile} />}
        {current.page === "automations" && <Automations api={api} jobId={current.jobId} />}
      </main>
    </div>
  );
}
