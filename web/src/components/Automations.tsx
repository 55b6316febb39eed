// Automations: the user's jobs (list, create with a cron or an interval,
// pause/resume, delete), each job's runs, and a run's transcript — the
// run's own event log replayed through the official client and drawn with
// the chat's rows.

import type { JSX } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import type { Message } from "@ag-ui/client";
import { ApiError, type Api, type Job, type JobRun, type Schedule } from "../api";
import { ServiceAgent } from "../agent";
import { deviceTimeZone } from "../clientTime";
import { formatDateTime } from "../dates";
import { dateLocale, t } from "../i18n";
import { toRows } from "../view";
import { PlusIcon } from "./icons";
import { MemoRow, type RowActions } from "./Rows";

/** The backend tools a job may enable (docs/API.md, system_agents.yaml). */
export const BACKEND_TOOLS = ["get_current_time", "calendar_read", "calendar_write", "calendar_delete", "render_ui"];

const errorText = (e: unknown) => (e instanceof ApiError ? e.detail : e instanceof Error ? e.message : String(e));

export function describeSchedule(schedule: Schedule): string {
  if ("cron" in schedule) return `cron ${schedule.cron}`;
  const s = schedule.every_seconds;
  if (s % 86_400 === 0) return s === 86_400 ? "every day" : `every ${s / 86_400} days`;
  if (s % 3_600 === 0) return s === 3_600 ? "every hour" : `every ${s / 3_600} hours`;
  if (s % 60 === 0) return s === 60 ? "every minute" : `every ${s / 60} minutes`;
  return `every ${s} seconds`;
}

const when = (value: string | number | null | undefined) => (value == null ? "—" : formatDateTime(value, dateLocale()));

export function Automations({ api, jobId }: { api: Api; jobId: string | null }): JSX.Element {
  return jobId ? <JobDetail api={api} id={jobId} /> : <JobList api={api} />;
}

function JobList({ api }: { api: Api }): JSX.Element {
  const [jobs, setJobs] = useState<Job[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);

  const load = () =>
    api
      .get<{ jobs: Job[] }>("/api/v1/automation/jobs")
      .then((b) => {
        setJobs(b.jobs);
        setError(null);
      })
      .catch((e: unknown) => setError(errorText(e)));
  useEffect(() => void load(), [api]);

  return (
    <div class="page">
      <header class="page-head">
        <h1>{t("nav.automations")}</h1>
        {!creating && (
          <button type="button" class="btn btn-primary" onClick={() => setCreating(true)} data-testid="new-job">
            <PlusIcon /> {t("auto.new")}
          </button>
        )}
      </header>
      <div class="page-body">
        {creating && (
          <JobForm
            api={api}
            onDone={(job) => {
              setCreating(false);
              if (job) setJobs((all) => [...(all ?? []), job]);
            }}
          />
        )}
        {error && (
          <div class="notice notice-error" role="alert">
            {error}
          </div>
        )}
        {jobs === null && !error && <div class="muted">{t("chat.loading")}</div>}
        {jobs?.length === 0 && !creating && (
          <div class="empty small">{t("auto.empty")}</div>
        )}
        <ul class="jobs" aria-label={t("nav.automations")}>
          {jobs?.map((job) => (
            <JobItem
              key={job.id}
              api={api}
              job={job}
              onChange={(next) => setJobs((all) => (all ?? []).flatMap((j) => (j.id !== job.id ? [j] : next ? [next] : [])))}
            />
          ))}
        </ul>
      </div>
    </div>
  );
}

function JobItem({ api, job, onChange }: { api: Api; job: Job; onChange(job: Job | null): void }): JSX.Element {
  const [busy, setBusy] = useState(false);
  const [asking, setAsking] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const act = async (go: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await go();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  const toggle = () =>
    act(async () => onChange(await api.json<Job>("PATCH", `/api/v1/automation/jobs/${job.id}`, { enabled: !job.enabled })));
  const remove = () =>
    act(async () => {
      await api.json("DELETE", `/api/v1/automation/jobs/${job.id}`);
      onChange(null);
    });
  return (
    <li class="job" data-testid="job">
      <div class="job-main">
        <a class="job-name" href={`#/automations/${job.id}`}>
          {job.name}
        </a>
        <span class={`pill ${job.enabled ? "pill-ok" : "pill-muted"}`}>{job.enabled ? t("auto.active") : t("auto.paused")}</span>
      </div>
      <div class="job-meta muted">
        {describeSchedule(job.schedule)} · {job.timezone}
        {job.enabled && job.nextRunAt ? ` · ${t("auto.next", { when: when(job.nextRunAt) })}` : ""}
        {job.config.agent ? ` · ${t("auto.agent", { agent: job.config.agent })}` : ""}
      </div>
      <div class="job-prompt">{job.prompt}</div>
      <div class="job-actions">
        <button type="button" class="btn btn-secondary" disabled={busy} onClick={() => void toggle()}>
          {job.enabled ? t("auto.pause") : t("auto.resume")}
        </button>
        {asking ? (
          <>
            <span class="muted">{t("auto.deleteAsk", { name: job.name })}</span>
            <button type="button" class="btn btn-danger" disabled={busy} onClick={() => void remove()}>
              {t("auto.delete")}
            </button>
            <button type="button" class="btn btn-secondary" onClick={() => setAsking(false)}>
              {t("auto.keep")}
            </button>
          </>
        ) : (
          <button type="button" class="btn btn-secondary" onClick={() => setAsking(true)}>
            {t("auto.deleteMore")}
          </button>
        )}
        <a class="btn btn-secondary" href={`#/automations/${job.id}`}>
          {t("auto.runs")}
        </a>
      </div>
      {error && (
        <div class="error-text" role="alert">
          {error}
        </div>
      )}
    </li>
  );
}

function JobForm({ api, onDone }: { api: Api; onDone(job: Job | null): void }): JSX.Element {
  const [name, setName] = useState("");
  const [prompt, setPrompt] = useState("");
  const [kind, setKind] = useState<"interval" | "cron">("interval");
  const [every, setEvery] = useState("60");
  const [unit, setUnit] = useState<"60" | "3600" | "86400">("60");
  const [cron, setCron] = useState("0 9 * * 1-5");
  const [zone, setZone] = useState(deviceTimeZone());
  const [agent, setAgent] = useState("");
  const [tools, setTools] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    setError(null);
    const schedule: Schedule = kind === "cron" ? { cron: cron.trim() } : { every_seconds: Math.round(Number(every) * Number(unit)) };
    const config: Job["config"] = {};
    if (agent.trim()) config.agent = agent.trim();
    if (tools.length) config.enabled_tools = tools;
    try {
      const job = await api.json<Job>("POST", "/api/v1/automation/jobs", { name, prompt, schedule, timezone: zone.trim(), config, enabled: true });
      onDone(job);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setSaving(false);
    }
  };

  const value = (set: (v: string) => void) => (e: Event) => set((e.currentTarget as HTMLInputElement).value);

  return (
    <form class="job-form card-surface" onSubmit={(e) => void submit(e)} aria-label={t("auto.new")}>
      <div class="field">
        <label for="job-name">{t("auto.name")}</label>
        <input id="job-name" value={name} onInput={value(setName)} required maxLength={200} placeholder="Morning briefing" />
      </div>
      <div class="field">
        <label for="job-prompt">{t("auto.prompt")}</label>
        <textarea id="job-prompt" value={prompt} onInput={value(setPrompt)} required rows={3} maxLength={10000} placeholder="What is on my calendar today?" />
      </div>
      <fieldset class="field">
        <legend>{t("auto.schedule")}</legend>
        <div class="radio-row">
          <label>
            <input type="radio" name="kind" checked={kind === "interval"} onChange={() => setKind("interval")} /> {t("auto.every")}
          </label>
          <input
            aria-label={t("auto.interval")}
            type="number"
            min="1"
            class="narrow"
            value={every}
            onInput={value(setEvery)}
            disabled={kind !== "interval"}
          />
          <select aria-label={t("auto.unit")} value={unit} onChange={value((v) => setUnit(v as typeof unit))} disabled={kind !== "interval"}>
            <option value="60">{t("auto.minutes")}</option>
            <option value="3600">{t("auto.hours")}</option>
            <option value="86400">{t("auto.days")}</option>
          </select>
        </div>
        <div class="radio-row">
          <label>
            <input type="radio" name="kind" checked={kind === "cron"} onChange={() => setKind("cron")} /> Cron
          </label>
          <input aria-label={t("auto.cronExpr")} value={cron} onInput={value(setCron)} disabled={kind !== "cron"} spellcheck={false} />
          <span class="muted small">{t("auto.cronHelp")}</span>
        </div>
      </fieldset>
      <div class="field-row">
        <div class="field">
          <label for="job-zone">{t("auto.zone")}</label>
          <input id="job-zone" value={zone} onInput={value(setZone)} list="timezones-jobs" spellcheck={false} />
          <datalist id="timezones-jobs">
            {useMemo(() => {
              const intl = Intl as unknown as { supportedValuesOf?: (k: string) => string[] };
              return (intl.supportedValuesOf?.("timeZone") ?? []).map((z) => <option key={z} value={z} />);
            }, [])}
          </datalist>
        </div>
        <div class="field">
          <label for="job-agent">{t("auto.agentLabel")}</label>
          <input id="job-agent" value={agent} onInput={value(setAgent)} list="agents" placeholder="default" />
          <datalist id="agents">
            <option value="general" />
            <option value="calendar" />
          </datalist>
        </div>
      </div>
      <fieldset class="field">
        <legend>{t("auto.tools")}</legend>
        <div class="checks">
          {BACKEND_TOOLS.map((t) => (
            <label key={t}>
              <input
                type="checkbox"
                checked={tools.includes(t)}
                onChange={(e) => setTools((all) => ((e.currentTarget as HTMLInputElement).checked ? [...all, t] : all.filter((x) => x !== t)))}
              />{" "}
              {t}
            </label>
          ))}
        </div>
      </fieldset>
      {error && (
        <div class="error-text" role="alert" data-testid="job-error">
          {error}
        </div>
      )}
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={saving}>
          {t("auto.create")}
        </button>
        <button type="button" class="btn btn-secondary" onClick={() => onDone(null)}>
          {t("auto.cancel")}
        </button>
      </div>
    </form>
  );
}

function JobDetail({ api, id }: { api: Api; id: string }): JSX.Element {
  const [job, setJob] = useState<Job | null>(null);
  const [runs, setRuns] = useState<JobRun[] | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    Promise.all([api.get<Job>(`/api/v1/automation/jobs/${id}`), api.get<{ runs: JobRun[] }>(`/api/v1/automation/jobs/${id}/runs`)])
      .then(([j, r]) => {
        setJob(j);
        setRuns([...r.runs].sort((a, b) => b.createdAt - a.createdAt));
      })
      .catch((e: unknown) => setError(errorText(e)));
  }, [api, id]);

  return (
    <div class="page">
      <header class="page-head">
        <h1>
          <a href="#/automations" class="back" aria-label={t("auto.back")}>
            ←
          </a>{" "}
          {job?.name ?? "Automation"}
        </h1>
      </header>
      <div class="page-body">
        {error && (
          <div class="notice notice-error" role="alert">
            {error}
          </div>
        )}
        {job && (
          <div class="job-meta muted">
            {describeSchedule(job.schedule)} · {job.timezone} · {job.enabled ? t("auto.next", { when: when(job.nextRunAt) }) : t("auto.pausedLower")}
          </div>
        )}
        {runs?.length === 0 && <div class="empty small">{t("auto.noRuns")}</div>}
        <ul class="runs" aria-label="Runs">
          {runs?.map((run) => (
            <li key={run.runId} class="run" data-testid="job-run">
              <button
                type="button"
                class="run-head"
                aria-expanded={open === run.runId}
                onClick={() => setOpen(open === run.runId ? null : run.runId)}
              >
                <span>{when(run.createdAt)}</span>
                <span class={`pill pill-${run.status === "succeeded" ? "ok" : run.status === "failed" ? "bad" : "muted"}`}>{run.status}</span>
              </button>
              {open === run.runId && job && <Transcript api={api} runId={run.runId} threadId={run.threadId} prompt={job.prompt} />}
            </li>
          ))}
        </ul>
      </div>
    </div>
  );
}

const NO_ACTIONS: RowActions = { onAction: () => {}, onConfirm: () => {}, pending: new Set(), expiries: new Map(), busy: true };

function Transcript({ api, runId, threadId, prompt }: { api: Api; runId: string; threadId: string; prompt: string }): JSX.Element {
  const [messages, setMessages] = useState<Message[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const agent = new ServiceAgent(api, threadId);
    agent.setMessages([{ id: `${runId}-prompt`, role: "user", content: prompt }]);
    const sub = agent.subscribe({ onMessagesChanged: ({ messages }) => setMessages([...messages]) });
    agent
      .connectAgent(
        { runId },
        {
          onRunErrorEvent: ({ event }) => setError(event.message),
          onRunFailed: ({ error: e }) => {
            setError(errorText(e));
            return { stopPropagation: true } as never;
          },
        },
      )
      .catch((e: unknown) => setError(errorText(e)));
    return () => {
      sub.unsubscribe();
      void agent.detachActiveRun();
    };
  }, [api, runId, threadId, prompt]);
  return (
    <div class="transcript" data-testid="transcript">
      {toRows(messages).map((row) => (
        <MemoRow key={`${row.kind}:${row.id}`} row={row} actions={NO_ACTIONS} />
      ))}
      {error && (
        <div class="notice notice-error" role="alert">
          {error}
        </div>
      )}
    </div>
  );
}
