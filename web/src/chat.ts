// The chat's state outside the components: one controller per thread — its
// history by day, the agent that runs its turns, the run going now and the
// turns sent to wait for it, the frontend tool calls waiting for the user
// (each until it expires) — and the actions on it. A thread's controller
// outlives the view while its run streams (ChatPool).
// Components subscribe and redraw at most once per animation frame, however
// fast events arrive.

import type { AgentSubscriber, Message } from "@ag-ui/client";
import { ApiError, type Api, type HistorySnapshot, type RunStatus } from "./api";
import { ServiceAgent, type MessagePart, type Turn } from "./agent";
import { delayUntil, expiryOf, isExpired } from "./approvals";
import { CONFIRM, FRONTEND_TOOLS, SET_THEME, parseArgs, runSetTheme } from "./tools";
import type { ThreadDetail } from "./threads";
import { fromHistory } from "./view";
import { t } from "./i18n";

export interface Day {
  day: string;
  messages: Message[];
}

export interface Notice {
  kind: "error" | "stopped" | "expired";
  text: string;
}

/** What the app offers for a turn sent while the thread's run goes: stop that run, or wait for it. */
export type BusyStrategy = "interrupt" | "enqueue";

/** A turn sent while a run went: accepted by the server at once, shown and followed once the runs before it end. */
export interface Waiting {
  id: string;
  text: string;
  images: number;
  strategy: BusyStrategy;
}

export interface UploadedImage {
  url: string;
  mimeType: string;
  filename?: string;
}

/** threadId → the run going on it, so a reload reattaches (several threads may run at once). */
const ACTIVE_RUNS_KEY = "agwire.activeRuns";

export function uuid(): string {
  return crypto.randomUUID();
}

function runs(): Record<string, string> {
  try {
    const value = JSON.parse(localStorage.getItem(ACTIVE_RUNS_KEY) ?? "{}") as unknown;
    if (value && typeof value === "object" && !Array.isArray(value)) {
      return Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === "string"));
    }
  } catch {
    // unreadable: nothing to reattach
  }
  return {};
}

function remember(threadId: string, runId: string | null): void {
  try {
    const all = runs();
    if (runId) all[threadId] = runId;
    else delete all[threadId];
    localStorage.setItem(ACTIVE_RUNS_KEY, JSON.stringify(all));
  } catch {
    // storage disabled: a reload will not reattach
  }
}

function remembered(threadId: string): string | null {
  return runs()[threadId] ?? null;
}

/** Threads made in this tab that the server has not seen yet (it answers 404 for them). */
const FRESH_KEY = "agwire.freshThreads";

/**
 * Kept in sessionStorage, so a reload of a new thread's URL does not ask the
 * server for a thread it does not have: the browser logs every 404 as an
 * error, and there is nothing to load. An id leaves when its first run is
 * accepted (from then on the server has it).
 */
export const freshThreads = {
  all(): string[] {
    try {
      const value = JSON.parse(sessionStorage.getItem(FRESH_KEY) ?? "[]") as unknown;
      return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
    } catch {
      return [];
    }
  },
  has(threadId: string): boolean {
    return this.all().includes(threadId);
  },
  set(threadId: string, fresh: boolean): void {
    try {
      const all = this.all().filter((id) => id !== threadId);
      if (fresh) all.push(threadId);
      sessionStorage.setItem(FRESH_KEY, JSON.stringify(all));
    } catch {
      // storage disabled: a reload of a new thread asks the server once (404: new)
    }
  },
};

/**
 * A refusal of a tool answer: "tool call <id> was already answered" or "… is
 * no longer pending: …" (409: another tab or a later turn went first), "… is
 * not pending in this thread" (422), or "… expired" (409: nobody answered in
 * time).
 */
export function refusedToolCall(error: unknown): string | null {
  if (!(error instanceof ApiError) || (error.status !== 409 && error.status !== 422)) return null;
  return /^tool call (\S+) (?:was already answered|is not pending|is no longer pending|expired$)/.exec(error.detail)?.[1] ?? null;
}

/** The tool call whose answer came too late (409 "tool call <id> expired"), else null. */
export function expiredToolCall(error: unknown): string | null {
  if (!(error instanceof ApiError) || error.status !== 409) return null;
  return /^tool call (\S+) expired$/.exec(error.detail)?.[1] ?? null;
}

/** What a run's subscriber found out that the turn that started it acts on. */
interface RunOutcome {
  /** The tool call the server refused an answer to. */
  refused: string | null;
}

/** The id of the assistant message that stands for a frontend tool call replayed from the server. */
const replayedId = (toolCallId: string) => `pending:${toolCallId}`;

const APPROVED = "Approved.";
const DENIED = "Denied.";
/** The turns the app writes itself when a confirmation is answered. */
const confirmation = new Set([APPROVED, DENIED]);

export class ChatController {
  /**
   * Names this controller for the view: its threadId changes once when the
   * latest thread turns out to be another, and the view (what is typed,
   * picked, focused) must not be drawn anew then.
   */
  readonly key = uuid();
  threadId: string;
  days: Day[] = [];
  hasMore = false;
  loading = true;
  /**
   * The thread's state (its active run, its pending calls) is being read
   * after its history: nothing can be sent until it is known, or a turn sent
   * meanwhile would be taken for a run to reattach to (and followed twice).
   */
  syncing = false;
  /** Settles when the current `open()` does: a turn sent while the thread opens waits for it. */
  private opening: Promise<void> = Promise.resolve();
  loadingOlder = false;
  loadError: string | null = null;
  agent: ServiceAgent;
  running = false;
  stopping = false;
  runId: string | null = null;
  step: string | null = null;
  reconnecting = false;
  /** Notices about live runs, drawn after the first `key` live messages. */
  notices = new Map<number, Notice>();
  /** confirm_action calls waiting for the user. */
  pendingConfirms = new Set<string>();
  /** When pending confirmations expire (ms since the epoch), for those the server said. */
  expiries = new Map<string, number>();
  private expiryTimers = new Map<string, ReturnType<typeof setTimeout>>();
  /** Confirmations that expired while a run streamed: the run owns the messages until it ends. */
  private overdue = new Set<string>();
  /** Turns sent while a run went, oldest first: each is followed when the run before it ends. */
  waiting: Waiting[] = [];
  /** Settles when the runs going or waiting on this thread have ended: the next turn follows it. */
  private lane: Promise<unknown> = Promise.resolve();
  /** Tool answers to send with the next user message. */
  private afterRun: (() => void) | null = null;
  private outbox: { id: string; toolCallId: string; content: string }[] = [];
  private listeners = new Set<() => void>();
  private frame = 0;
  private disposed = false;
  /** Bumped by every change of thread: an answer for an older one is dropped. */
  private navigation = 0;
  /** Told when a run starts (accepted) and when it ends: the thread list follows. */
  onRun: ((threadId: string, running: boolean) => void) | null = null;

  constructor(
    private readonly api: Api,
    threadId?: string,
    /** A thread made here, not yet on the server: nothing to load. */
    fresh = false,
  ) {
    this.threadId = threadId ?? uuid();
    this.agent = this.makeAgent(this.threadId);
    if (fresh) this.loading = false;
  }

  private makeAgent(threadId: string): ServiceAgent {
    const agent = new ServiceAgent(this.api, threadId);
    agent.subscribe({ onMessagesChanged: () => this.changed() });
    agent.onAccepted = () => {
      // The server has the thread now.
      freshThreads.set(this.threadId, false);
      this.onRun?.(this.threadId, true);
    };
    agent.onConnection = (state) => {
      this.reconnecting = state === "reconnecting";
      this.changed();
    };
    return agent;
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Schedules one redraw for everything that changed in this frame. */
  changed(): void {
    if (this.frame || this.disposed) return;
    const flush = () => {
      this.frame = 0;
      for (const listener of this.listeners) listener();
    };
    this.frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(flush) : (setTimeout(flush, 16) as unknown as number);
  }

  /** A run streams, or a turn waits to follow one. */
  get busy(): boolean {
    return this.running || this.waiting.length > 0;
  }

  dispose(): void {
    this.disposed = true;
    for (const timer of this.expiryTimers.values()) clearTimeout(timer);
    this.expiryTimers.clear();
    void this.agent.detachActiveRun();
  }

  /** Everything shown, oldest first. */
  messages(): Message[] {
    const out: Message[] = [];
    for (const d of this.days) out.push(...d.messages);
    out.push(...this.agent.messages);
    return out;
  }

  private history(threadId: string | null, before?: string): Promise<HistorySnapshot> {
    const query = new URLSearchParams();
    if (threadId) query.set("threadId", threadId);
    if (before) query.set("before", before);
    const qs = query.toString();
    return this.api.get<HistorySnapshot>(`/api/v1/agent/history${qs ? `?${qs}` : ""}`);
  }

  /** Opens the latest thread (or `threadId`) at its latest day; reattaches to its running run. */
  /**
   * Opens the latest thread (or `threadId`) at its latest day, then reads its
   * state; resolves once the thread can be written to (a run it reattached
   * to streams on).
   */
  open(threadId?: string): Promise<void> {
    this.opening = this.opened(threadId);
    return this.opening;
  }

  private async opened(threadId?: string): Promise<void> {
    const navigation = ++this.navigation;
    this.loading = true;
    this.syncing = true;
    this.changed();
    try {
      let snapshot: HistorySnapshot;
      try {
        snapshot = await this.history(threadId ?? null);
      } catch (error) {
        // A link to a thread the server does not have (yet): a new thread.
        if (!(threadId && error instanceof ApiError && error.status === 404)) throw error;
        snapshot = { scope: "history_day", threadId: null, day: null, hasMore: false, messages: [] };
      }
      // Disposed, or the user moved on (a new thread) while it loaded.
      if (this.disposed || navigation !== this.navigation) return;
      if (snapshot.threadId) this.setThread(snapshot.threadId);
      this.days = snapshot.day ? [{ day: snapshot.day, messages: fromHistory(snapshot.messages) }] : [];
      this.hasMore = snapshot.hasMore;
      this.loadError = null;
      this.loading = false;
      this.changed();
      if (!snapshot.threadId) {
        // No thread on the server (none at all, or not this one): this one
        // is new, and stays so across a reload until its first run.
        freshThreads.set(this.threadId, true);
        return;
      }
      // History first, then the thread's state: a run seen running here had
      // not joined the history read before it, so replaying it duplicates
      // nothing.
      const detail = await this.detail();
      if (this.disposed || navigation !== this.navigation) return;
      if (detail) this.replay(detail);
      const runId = detail ? detail.activeRunId : remembered(this.threadId);
      const running = runId ? await this.stillRunning(runId) : false;
      if (this.disposed || navigation !== this.navigation) return;
      // Followed, not awaited: the thread is open while its run streams.
      if (running && runId) void this.reattach(runId);
    } catch (error) {
      if (navigation !== this.navigation) return;
      this.loading = false;
      this.loadError = error instanceof Error ? error.message : String(error);
      this.changed();
    } finally {
      if (navigation === this.navigation) {
        this.syncing = false;
        this.changed();
      }
    }
  }

  /** The thread's runs and pending calls; null when the server has no such thread (yet) or no threads API. */
  private async detail(): Promise<ThreadDetail | null> {
    try {
      return await this.api.get<ThreadDetail>(`/api/v1/agent/threads/${encodeURIComponent(this.threadId)}`);
    } catch {
      return null;
    }
  }

  /**
   * Frontend tool calls the thread's runs left unanswered (a reload, another
   * tab): each confirm_action is asked again, answered like a live one.
   */
  private replay(detail: ThreadDetail): void {
    const shown = new Set(this.agent.messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []).map((c) => c.id) : [])));
    for (const call of detail.pendingToolCalls ?? []) {
      if (call.name !== CONFIRM || shown.has(call.toolCallId)) continue;
      this.agent.addMessage({
        id: replayedId(call.toolCallId),
        role: "assistant",
        toolCalls: [{ id: call.toolCallId, type: "function", function: { name: call.name, arguments: call.arguments } }],
      });
      this.pendingConfirms.add(call.toolCallId);
      this.expireAt(call.toolCallId, expiryOf(call.expiresAt));
    }
    this.changed();
  }

  /** When the confirmations a run just left expire: its end does not say, the thread does. */
  private async learnExpiries(ids: string[]): Promise<void> {
    const detail = await this.detail();
    if (!detail || this.disposed) return;
    for (const call of detail.pendingToolCalls ?? []) {
      if (ids.includes(call.toolCallId) && this.pendingConfirms.has(call.toolCallId)) this.expireAt(call.toolCallId, expiryOf(call.expiresAt));
    }
    this.changed();
  }

  /** Drops the card of `toolCallId` when `at` comes (null: it never expires). */
  private expireAt(toolCallId: string, at: number | null): void {
    clearTimeout(this.expiryTimers.get(toolCallId));
    this.expiryTimers.delete(toolCallId);
    if (at == null) {
      this.expiries.delete(toolCallId);
      return;
    }
    this.expiries.set(toolCallId, at);
    this.expiryTimers.set(toolCallId, setTimeout(() => this.expire(toolCallId), delayUntil(at, Date.now())));
  }

  private expire(toolCallId: string): void {
    this.expiryTimers.delete(toolCallId);
    const at = this.expiries.get(toolCallId) ?? null;
    if (this.disposed || at == null || !this.pendingConfirms.has(toolCallId)) return;
    // Woken early (a timer waits 24 days at most; the clock was set back): wait again.
    if (!isExpired(at, Date.now())) return this.expireAt(toolCallId, at);
    if (this.running) {
      this.overdue.add(toolCallId);
      return;
    }
    this.dropCall(toolCallId);
    this.notices.set(this.agent.messages.length, { kind: "expired", text: t("confirm.expired") });
    this.changed();
  }

  /** The call `toolCallId` can no longer be answered: its card and its answer go (and the turn `userId` that carried it). */
  private dropCall(toolCallId: string, userId?: string): void {
    this.pendingConfirms.delete(toolCallId);
    this.expiries.delete(toolCallId);
    clearTimeout(this.expiryTimers.get(toolCallId));
    this.expiryTimers.delete(toolCallId);
    this.outbox = this.outbox.filter((a) => a.toolCallId !== toolCallId);
    const messages = this.agent.messages.flatMap((m) => {
      if (m.id === userId || (m.role === "tool" && m.toolCallId === toolCallId)) return [];
      if (m.role === "assistant" && m.toolCalls?.some((c) => c.id === toolCallId)) {
        const toolCalls = m.toolCalls.filter((c) => c.id !== toolCallId);
        return toolCalls.length || m.content ? [{ ...m, toolCalls }] : [];
      }
      return [m];
    });
    this.agent.setMessages(messages);
  }

  private setThread(threadId: string): void {
    if (threadId === this.threadId) return;
    void this.agent.detachActiveRun();
    this.threadId = threadId;
    this.agent = this.makeAgent(threadId);
  }

  /** Prepends the day before the earliest one shown. */
  async loadOlder(): Promise<boolean> {
    const first = this.days[0];
    if (!first || !this.hasMore || this.loadingOlder) return false;
    this.loadingOlder = true;
    this.changed();
    try {
      const snapshot = await this.history(this.threadId, first.day);
      if (snapshot.day && snapshot.threadId === this.threadId) {
        this.days = [{ day: snapshot.day, messages: fromHistory(snapshot.messages) }, ...this.days];
        this.hasMore = snapshot.hasMore;
      } else {
        this.hasMore = false;
      }
      return true;
    } catch (error) {
      this.loadError = error instanceof Error ? error.message : String(error);
      return false;
    } finally {
      this.loadingOlder = false;
      this.changed();
    }
  }

  /** Whether `runId` is still going (else it is forgotten). */
  private async stillRunning(runId: string): Promise<boolean> {
    let status: RunStatus;
    try {
      status = await this.api.get<RunStatus>(`/api/v1/agent/runs/${encodeURIComponent(runId)}`);
    } catch {
      remember(this.threadId, null);
      return false;
    }
    if (status.status !== "running" && status.status !== "queued") {
      remember(this.threadId, null);
      return false;
    }
    return true;
  }

  private async reattach(runId: string): Promise<void> {
    const run = this.drive(runId, () => this.agent.connectAgent({ runId, tools: FRONTEND_TOOLS }, this.runSubscriber(runId, { refused: null })));
    this.lane = run.catch(() => undefined);
    await run;
  }

  /**
   * Sends one user turn (text and uploaded images), with any waiting tool
   * answers. While a run goes it is sent only with a `strategy`: posted at
   * once (the server stops that run, or queues this one after it) and
   * followed when the runs before it have ended.
   */
  async send(text: string, images: UploadedImage[] = [], strategy?: BusyStrategy): Promise<void> {
    const trimmed = text.trim();
    if (!trimmed && images.length === 0) return;
    // Pressed while the thread opens (the composer can be a frame behind):
    // the turn goes once its state is known, never silently dropped.
    // (Each open awaited once: a new one may start while one is awaited.)
    let awaited: Promise<void> | null = null;
    while ((this.loading || this.syncing) && this.opening !== awaited) {
      awaited = this.opening;
      await awaited;
    }
    if (this.disposed || this.loading || this.syncing) return;
    const busy = this.busy;
    if (busy && !strategy) return;
    if (!busy) {
      // A confirmation the user talked past is answered as dismissed.
      for (const id of this.pendingConfirms) this.answer(id, JSON.stringify({ approved: false, dismissed: true }));
      this.pendingConfirms.clear();
    }
    const answers = this.outbox;
    this.outbox = [];
    const userId = uuid();
    const seed: MessagePart[] = [];
    if (trimmed) seed.push({ type: "text", text: trimmed });
    for (const image of images) {
      seed.push({ type: "binary", mimeType: image.mimeType, url: image.url, ...(image.filename ? { filename: image.filename } : {}) });
    }
    const local: Message = {
      id: userId,
      role: "user",
      content:
        images.length === 0
          ? trimmed
          : [
              ...(trimmed ? [{ type: "text" as const, text: trimmed }] : []),
              ...images.map((i) => ({ type: "image" as const, source: { type: "url" as const, value: i.url, mimeType: i.mimeType } })),
            ],
    };
    const turn: Turn = { user: { id: userId, content: images.length === 0 ? trimmed : seed }, toolAnswers: answers };
    const runId = `run-${uuid()}`;
    let run: Promise<string | null>;
    if (busy) {
      this.agent.post(turn, runId, FRONTEND_TOOLS, strategy!);
      const waiting: Waiting = { id: userId, text: trimmed, images: images.length, strategy: strategy! };
      this.waiting.push(waiting);
      this.changed();
      run = this.lane.then(() => {
        this.waiting = this.waiting.filter((w) => w !== waiting);
        if (this.disposed) return null;
        this.passOver();
        return this.runTurn(local, runId);
      });
    } else {
      this.agent.prepare(turn);
      run = this.runTurn(local, runId);
    }
    this.lane = run.catch(() => undefined);
    const refused = await run;
    if (refused) {
      this.dropCall(refused, userId);
      // What the user typed still goes, without the answer nobody waits for.
      const typed = trimmed && !confirmation.has(trimmed);
      if (typed || images.length) await this.send(text, images, this.busy ? "enqueue" : undefined);
    }
  }

  /** Shows the turn's user message and follows its run; resolves to the tool call whose answer the server refused, if any. */
  private async runTurn(local: Message, runId: string): Promise<string | null> {
    this.agent.addMessage(local);
    const outcome: RunOutcome = { refused: null };
    await this.drive(runId, () => this.agent.runAgent({ runId, tools: FRONTEND_TOOLS }, this.runSubscriber(runId, outcome)));
    return outcome.refused;
  }

  /**
   * A turn posted while the run before it went could not answer what that
   * run asked at its end: the server went on without those answers, and so
   * does the app.
   */
  private passOver(): void {
    for (const id of this.pendingConfirms) {
      this.agent.addMessage({ id: uuid(), role: "tool", toolCallId: id, content: JSON.stringify({ approved: false, dismissed: true }) });
      this.expireAt(id, null);
    }
    this.pendingConfirms.clear();
    this.outbox = [];
  }

  /** Answers a pending confirm_action and sends the decision as the next turn. */
  async confirm(toolCallId: string, approved: boolean): Promise<void> {
    if (!this.pendingConfirms.has(toolCallId) || this.busy) return;
    this.pendingConfirms.delete(toolCallId);
    this.answer(toolCallId, JSON.stringify({ approved }));
    await this.send(approved ? APPROVED : DENIED);
  }

  /** Records a frontend tool's answer: shown at once, sent with the next user message. */
  private answer(toolCallId: string, content: string): void {
    const id = uuid();
    this.outbox.push({ id, toolCallId, content });
    this.agent.addMessage({ id, role: "tool", toolCallId, content });
  }

  async stop(): Promise<void> {
    if (!this.running || !this.runId || this.stopping) return;
    this.stopping = true;
    this.changed();
    try {
      await this.api.json("POST", `/api/v1/agent/runs/${encodeURIComponent(this.runId)}/cancel`, {});
    } catch (error) {
      this.stopping = false;
      this.notices.set(this.agent.messages.length, { kind: "error", text: t("chat.couldNotStop", { error: String((error as Error).message) }) });
      this.changed();
    }
  }

  private runSubscriber(runId: string, outcome: RunOutcome): AgentSubscriber {
    let handBack: string[] = [];
    this.afterRun = () => this.handToolsBack(handBack);
    const noticeAt = (notice: Notice) => {
      this.notices.set(this.agent.messages.length, notice);
    };
    return {
      onRunStartedEvent: () => {
        this.step = null;
        this.changed();
      },
      onStepStartedEvent: ({ event }) => {
        this.step = event.stepName;
        this.changed();
      },
      onStepFinishedEvent: () => {
        this.step = null;
        this.changed();
      },
      onRunErrorEvent: ({ event }) => {
        noticeAt({ kind: "error", text: event.message || t("chat.runFailed") });
        this.changed();
      },
      onRunFinishedEvent: (params) => {
        if (params.outcome === "cancelled") noticeAt({ kind: "stopped", text: t("chat.stopped") });
        if (params.outcome === "success") handBack = params.pendingToolCallIds;
        this.changed();
      },
      onRunFailed: ({ error }) => {
        outcome.refused = refusedToolCall(error);
        const text = error instanceof ApiError ? error.detail : error.message;
        if (expiredToolCall(error)) noticeAt({ kind: "expired", text: t("confirm.expired") });
        else noticeAt({ kind: "error", text: this.runId === runId && this.reconnecting ? t("chat.connectionLost", { error: text }) : text });
        this.changed();
        // Shown in the thread; the client need not log and rethrow it.
        return { stopPropagation: true } as never;
      },
    };
  }

  /** The run ended with frontend tool calls for the app: run them or ask the user. */
  private handToolsBack(pending: string[]): void {
    const calls = this.agent.messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : []));
    const asked: string[] = [];
    for (const id of pending) {
      const call = calls.find((c) => c.id === id);
      if (!call) continue;
      if (call.function.name === CONFIRM) {
        this.pendingConfirms.add(id);
        asked.push(id);
      } else if (call.function.name === SET_THEME) this.answer(id, runSetTheme(parseArgs(call.function.arguments)));
      else this.answer(id, JSON.stringify({ error: `this app has no tool named ${call.function.name}` }));
    }
    if (asked.length) void this.learnExpiries(asked);
  }

  private runAfter(): void {
    const after = this.afterRun;
    this.afterRun = null;
    after?.();
  }

  private async drive(runId: string, go: () => Promise<unknown>): Promise<void> {
    this.running = true;
    this.stopping = false;
    this.runId = runId;
    this.step = null;
    this.reconnecting = false;
    remember(this.threadId, runId);
    this.changed();
    this.afterRun = null;
    try {
      await go();
      // After the client's pipeline is done with the run's messages.
      this.runAfter();
    } catch (error) {
      // runAgent rejects only for what onRunFailed did not take.
      this.notices.set(this.agent.messages.length, { kind: "error", text: error instanceof Error ? error.message : String(error) });
    } finally {
      this.running = false;
      this.stopping = false;
      this.step = null;
      this.reconnecting = false;
      remember(this.threadId, null);
      const overdue = [...this.overdue];
      this.overdue.clear();
      for (const id of overdue) this.expire(id);
      this.changed();
      // A turn waiting for this run follows it at once: the thread is still busy.
      if (this.waiting.length === 0) this.onRun?.(this.threadId, false);
    }
  }
}

/**
 * One ChatController per thread: the one shown, and any other whose run is
 * still going (it streams on in the background and is let go when it ends).
 */
export class ChatPool {
  private chats = new Map<string, ChatController>();
  current: ChatController | null = null;

  constructor(
    private readonly api: Api,
    /** A run started or ended on a thread (the list follows). */
    private readonly onRun: (threadId: string, running: boolean) => void,
  ) {}

  private make(threadId?: string, fresh = false): ChatController {
    const chat = new ChatController(this.api, threadId, fresh);
    chat.onRun = (id, running) => {
      this.onRun(id, running);
      if (!running) this.release();
    };
    return chat;
  }

  /** Shows `threadId`'s controller, opened on first use; `fresh`: a thread made here. */
  show(threadId: string, fresh = false): ChatController {
    let chat = this.chats.get(threadId);
    if (!chat) {
      chat = this.make(threadId, fresh);
      this.chats.set(threadId, chat);
      if (!fresh) void chat.open(threadId);
    }
    this.current = chat;
    this.release();
    return chat;
  }

  /** Shows the latest thread; `opened` gets it once the server said which it is. */
  showLatest(opened: (chat: ChatController) => void): ChatController {
    const chat = this.make();
    this.current = chat;
    this.release();
    void chat.open().then(() => {
      if (this.current !== chat) return;
      this.chats.set(chat.threadId, chat);
      opened(chat);
    });
    return chat;
  }

  /** The controllers kept: the one shown and those whose run is going. */
  live(): ChatController[] {
    return [...this.chats.values()];
  }

  /** Forgets a thread (deleted): its controller stops. */
  forget(threadId: string): void {
    const chat = this.chats.get(threadId);
    this.chats.delete(threadId);
    if (chat && chat !== this.current) chat.dispose();
  }

  private release(): void {
    for (const [id, chat] of this.chats) {
      if (chat !== this.current && !chat.busy) {
        chat.dispose();
        this.chats.delete(id);
      }
    }
  }

  dispose(): void {
    for (const chat of this.chats.values()) chat.dispose();
    this.current?.dispose();
    this.chats.clear();
  }
}
