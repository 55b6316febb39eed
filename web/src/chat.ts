// The chat's state outside the components: one thread at a time — its
// history by day, the agent that runs its turns, the run going now, the
// frontend tool calls waiting for the user — and the actions on it.
// Components subscribe and redraw at most once per animation frame, however
// fast events arrive.

import type { AgentSubscriber, Message } from "@ag-ui/client";
import { ApiError, type Api, type HistorySnapshot, type RunStatus } from "./api";
import { ServiceAgent, type SeedPart } from "./agent";
import { CONFIRM, FRONTEND_TOOLS, SET_THEME, parseArgs, runSetTheme } from "./tools";
import { fromHistory } from "./view";
import { t } from "./i18n";

export interface Day {
  day: string;
  messages: Message[];
}

export interface Notice {
  kind: "error" | "stopped";
  text: string;
}

export interface UploadedImage {
  url: string;
  mimeType: string;
  filename?: string;
}

const ACTIVE_RUN_KEY = "agwire.activeRun";

function uuid(): string {
  return crypto.randomUUID();
}

function remember(value: { threadId: string; runId: string } | null): void {
  try {
    if (value) localStorage.setItem(ACTIVE_RUN_KEY, JSON.stringify(value));
    else localStorage.removeItem(ACTIVE_RUN_KEY);
  } catch {
    // storage disabled: a reload will not reattach
  }
}

function remembered(): { threadId: string; runId: string } | null {
  try {
    const value = JSON.parse(localStorage.getItem(ACTIVE_RUN_KEY) ?? "null") as unknown;
    if (value && typeof value === "object") {
      const v = value as Record<string, unknown>;
      if (typeof v.threadId === "string" && typeof v.runId === "string") return { threadId: v.threadId, runId: v.runId };
    }
  } catch {
    // unreadable: nothing to reattach
  }
  return null;
}

export class ChatController {
  threadId: string;
  days: Day[] = [];
  hasMore = false;
  loading = true;
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
  /** Tool answers to send with the next user message. */
  private afterRun: (() => void) | null = null;
  private outbox: { id: string; toolCallId: string; content: string }[] = [];
  private listeners = new Set<() => void>();
  private frame = 0;
  private disposed = false;
  /** Bumped by every change of thread: an answer for an older one is dropped. */
  private navigation = 0;

  constructor(
    private readonly api: Api,
    threadId?: string,
  ) {
    this.threadId = threadId ?? uuid();
    this.agent = this.makeAgent(this.threadId);
  }

  private makeAgent(threadId: string): ServiceAgent {
    const agent = new ServiceAgent(this.api, threadId);
    agent.subscribe({ onMessagesChanged: () => this.changed() });
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

  dispose(): void {
    this.disposed = true;
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
  async open(threadId?: string): Promise<void> {
    const navigation = ++this.navigation;
    this.loading = true;
    this.changed();
    try {
      const snapshot = await this.history(threadId ?? null);
      // Disposed, or the user moved on (a new thread) while it loaded.
      if (this.disposed || navigation !== this.navigation) return;
      if (snapshot.threadId) this.setThread(snapshot.threadId);
      this.days = snapshot.day ? [{ day: snapshot.day, messages: fromHistory(snapshot.messages) }] : [];
      this.hasMore = snapshot.hasMore;
      this.loadError = null;
      this.loading = false;
      this.changed();
      // History first, then the run's status: a run seen running here had
      // not joined the history read before it, so replaying it duplicates
      // nothing.
      const active = remembered();
      if (active && active.threadId === this.threadId) await this.reattach(active.runId);
    } catch (error) {
      if (navigation !== this.navigation) return;
      this.loading = false;
      this.loadError = error instanceof Error ? error.message : String(error);
      this.changed();
    }
  }

  private setThread(threadId: string): void {
    if (threadId === this.threadId) return;
    void this.agent.detachActiveRun();
    this.threadId = threadId;
    this.agent = this.makeAgent(threadId);
  }

  /** A fresh, empty thread (it exists on the server once its first message is sent). */
  newThread(): void {
    if (this.running) return;
    this.navigation++;
    this.setThread(uuid());
    this.days = [];
    this.hasMore = false;
    this.notices.clear();
    this.pendingConfirms.clear();
    this.outbox = [];
    this.loading = false;
    this.loadError = null;
    this.changed();
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

  private async reattach(runId: string): Promise<void> {
    let status: RunStatus;
    try {
      status = await this.api.get<RunStatus>(`/api/v1/agent/runs/${encodeURIComponent(runId)}`);
    } catch {
      remember(null);
      return;
    }
    if (status.status !== "running" && status.status !== "queued") {
      remember(null);
      return;
    }
    await this.drive(runId, () => this.agent.connectAgent({ runId, tools: FRONTEND_TOOLS }, this.runSubscriber(runId)));
  }

  /** Sends one user turn (text and uploaded images), with any waiting tool answers. */
  async send(text: string, images: UploadedImage[] = []): Promise<void> {
    const trimmed = text.trim();
    if (this.loading || this.running || (!trimmed && images.length === 0)) return;
    // A confirmation the user talked past is answered as dismissed.
    for (const id of this.pendingConfirms) this.answer(id, JSON.stringify({ approved: false, dismissed: true }));
    this.pendingConfirms.clear();
    const answers = this.outbox;
    this.outbox = [];
    const userId = uuid();
    const seed: SeedPart[] = [];
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
    this.agent.addMessage(local);
    this.agent.prepare({ user: { id: userId, content: images.length === 0 ? trimmed : seed }, toolAnswers: answers });
    const runId = `run-${uuid()}`;
    await this.drive(runId, () => this.agent.runAgent({ runId, tools: FRONTEND_TOOLS }, this.runSubscriber(runId)));
  }

  /** Answers a pending confirm_action and sends the decision as the next turn. */
  async confirm(toolCallId: string, approved: boolean): Promise<void> {
    if (!this.pendingConfirms.has(toolCallId) || this.running) return;
    this.pendingConfirms.delete(toolCallId);
    this.answer(toolCallId, JSON.stringify({ approved }));
    await this.send(approved ? "Approved." : "Denied.");
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

  private runSubscriber(runId: string): AgentSubscriber {
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
        const text = error instanceof ApiError ? error.detail : error.message;
        noticeAt({ kind: "error", text: this.runId === runId && this.reconnecting ? t("chat.connectionLost", { error: text }) : text });
        this.changed();
        // Shown in the thread; the client need not log and rethrow it.
        return { stopPropagation: true } as never;
      },
    };
  }

  /** The run ended with frontend tool calls for the app: run them or ask the user. */
  private handToolsBack(pending: string[]): void {
    const calls = this.agent.messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : []));
    for (const id of pending) {
      const call = calls.find((c) => c.id === id);
      if (!call) continue;
      if (call.function.name === CONFIRM) this.pendingConfirms.add(id);
      else if (call.function.name === SET_THEME) this.answer(id, runSetTheme(parseArgs(call.function.arguments)));
      else this.answer(id, JSON.stringify({ error: `this app has no tool named ${call.function.name}` }));
    }
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
    remember({ threadId: this.threadId, runId });
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
      remember(null);
      this.changed();
    }
  }
}
