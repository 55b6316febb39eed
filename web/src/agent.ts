// One thread's agent on the official client. `run` posts the turn to
// the service's `POST /api/v1/agent/runs` (202) and follows the run's event
// stream; `connect` follows a run that is already going (a reload
// mid-run). A turn sent while a run goes is posted at once with a
// multitask strategy (`post`) and followed by `run` once the run before it
// has ended. Everything after that — chunk expansion, the verifier,
// `apply`, subscribers — is @ag-ui/client's AbstractAgent pipeline.

import { AbstractAgent, type BaseEvent, type Message, type RunAgentInput, type Tool } from "@ag-ui/client";
import { defer, from, switchMap, type Observable } from "rxjs";
import { errorOf, type Accepted, type Api } from "./api";
import { clientTime } from "./clientTime";
import { followRun, type ConnectionState } from "./stream";

/** A user message part as the service accepts it: text, or an image by signed URL. */
export type MessagePart =
  | { type: "text"; text: string }
  | { type: "binary"; mimeType: string; url: string; filename?: string };

export interface Turn {
  /** The one user message of the request. */
  user: { id: string; content: string | MessagePart[] };
  /** Answers to the previous turn's frontend tool calls. */
  toolAnswers: { id: string; toolCallId: string; content: string }[];
}

/** What the service does with a run posted to a thread that has an active run (`?multitask_strategy=`). */
export type MultitaskStrategy = "reject" | "enqueue" | "interrupt" | "rollback";

/** The run endpoint; without a strategy the service's `runs.busy_thread` decides. */
export function runsUrl(strategy?: MultitaskStrategy): string {
  const base = "/api/v1/agent/runs";
  return strategy ? `${base}?${new URLSearchParams({ multitask_strategy: strategy })}` : base;
}

export class ServiceAgent extends AbstractAgent {
  /** The request body's messages for the next `runAgent` (seed: exactly one user message). */
  private turn: Turn | null = null;
  /** Runs posted ahead of their `runAgent` (sent while another run went), by runId. */
  private posted = new Map<string, Promise<Accepted>>();
  onConnection: ((state: ConnectionState) => void) | null = null;
  onAccepted: ((accepted: Accepted) => void) | null = null;

  constructor(
    private readonly api: Api,
    threadId: string,
  ) {
    super({ threadId });
  }

  /** Sets what the next `runAgent` sends. */
  prepare(turn: Turn): void {
    this.turn = turn;
  }

  /** The event stream of `runId`, resumed across dropped connections. */
  follow(runId: string): Observable<BaseEvent> {
    return followRun({
      open: (after, signal) => {
        const headers: Record<string, string> = { Accept: "text/event-stream" };
        if (after > 0) headers["Last-Event-ID"] = String(after);
        return fetch(`/api/v1/agent/runs/${encodeURIComponent(runId)}/events`, {
          headers: this.api.headers(headers),
          signal,
          cache: "no-store",
        });
      },
      onConnection: (state) => this.onConnection?.(state),
    });
  }

  /**
   * Posts `turn` as run `runId` now, on a thread whose run is still going
   * (`strategy` says what becomes of that run); a later `runAgent` with the
   * same runId follows it instead of posting again.
   */
  post(turn: Turn, runId: string, tools: Tool[], strategy: MultitaskStrategy): void {
    const accepted = this.accept(turn, runId, tools, strategy);
    // A refusal is the run's, reported when it is followed; until then it is not unhandled.
    accepted.catch(() => {});
    this.posted.set(runId, accepted);
  }

  private async accept(turn: Turn, runId: string, tools: Tool[], strategy?: MultitaskStrategy): Promise<Accepted> {
    const body = {
      threadId: this.threadId,
      runId,
      state: {},
      messages: [
        { id: turn.user.id, role: "user", content: turn.user.content },
        ...turn.toolAnswers.map((t) => ({ id: t.id, role: "tool", toolCallId: t.toolCallId, content: t.content })),
      ],
      tools,
      context: [],
      forwardedProps: { runtime_mode: "chat", client_time: clientTime() },
    };
    const response = await fetch(runsUrl(strategy), {
      method: "POST",
      headers: this.api.headers({ "Content-Type": "application/json", Accept: "application/json" }),
      body: JSON.stringify(body),
    });
    if (!response.ok) throw await errorOf(response);
    const accepted = (await response.json()) as Accepted;
    this.onAccepted?.(accepted);
    return accepted;
  }

  override run(input: RunAgentInput): Observable<BaseEvent> {
    const posted = this.posted.get(input.runId);
    this.posted.delete(input.runId);
    const turn = this.turn;
    this.turn = null;
    if (!posted && !turn) throw new Error("ServiceAgent.run without a prepared turn");
    return defer(() => from(posted ?? this.accept(turn!, input.runId, input.tools))).pipe(switchMap((accepted) => this.follow(accepted.runId)));
  }

  protected override connect(input: RunAgentInput): Observable<BaseEvent> {
    return this.follow(input.runId);
  }
}

export type { Message, Tool };
