// Following a run's event stream (GET /api/v1/agent/runs/{runId}/events)
// across dropped connections. The official client does the reading: its
// `runHttpRequest` + `transformHttpEventStream` turn each connection into
// AG-UI events; this file only strings connections together.
//
// The service numbers a run's events 1, 2, 3, … (`id: <seq>` on every SSE
// frame) and resumes exactly after `Last-Event-ID: <seq>`; one frame is one
// event, so the number of events received so far *is* the id of the last
// one. After a drop we reconnect with that number: the stream the caller
// sees is the run's events, each exactly once, in order — which is what lets
// the client's verifier and `apply` treat it as one uninterrupted stream.

import { EventType, runHttpRequest, transformHttpEventStream, type BaseEvent } from "@ag-ui/client";
import { Observable, type Subscription } from "rxjs";

export type ConnectionState = "open" | "reconnecting";

export interface FollowOptions {
  /** Opens the stream resuming after `after` events (0: from the start). */
  open(after: number, signal: AbortSignal): Promise<Response>;
  /** Delay before reconnect attempt `attempt` (1, 2, …), in ms. */
  backoff?(attempt: number): number;
  /** Consecutive failed connections before giving up. */
  maxAttempts?: number;
  /** Told when the stream is (again) flowing or is being reconnected. */
  onConnection?(state: ConnectionState, after: number): void;
}

export const defaultBackoff = (attempt: number): number => Math.min(250 * 2 ** (attempt - 1), 5000);

/** A 4xx other than 408/429 will not get better by retrying. */
function isFatal(error: unknown): boolean {
  const status = (error as { status?: unknown })?.status;
  return typeof status === "number" && status >= 400 && status < 500 && status !== 408 && status !== 429;
}

/** The client reports an aborted read as a synthetic RUN_ERROR (code "abort"). */
function isSyntheticAbort(event: BaseEvent): boolean {
  const e = event as BaseEvent & { code?: unknown; rawEvent?: unknown };
  return e.type === EventType.RUN_ERROR && e.code === "abort" && e.rawEvent instanceof Error;
}

/**
 * The response with a body that ends where the original one fails. The
 * client reads a failed body by erroring, then cancels the reader, and the
 * cancel of an errored stream rejects again, unhandled; an early clean end
 * is already a drop here (the run had not finished), so nothing is lost.
 */
function endingCleanly(response: Response): Response {
  const source = response.body;
  if (!source) return response;
  const reader = source.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch {
        controller.close();
      }
    },
    cancel(reason) {
      return reader.cancel(reason).catch(() => undefined);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

export function followRun(options: FollowOptions): Observable<BaseEvent> {
  const backoff = options.backoff ?? defaultBackoff;
  const maxAttempts = options.maxAttempts ?? 20;
  return new Observable<BaseEvent>((subscriber) => {
    let seq = 0;
    let failures = 0;
    let done = false;
    let controller: AbortController | null = null;
    let connection: Subscription | null = null;
    let timer: ReturnType<typeof setTimeout> | null = null;

    const drop = (error: unknown) => {
      connection?.unsubscribe();
      connection = null;
      if (done) return;
      if (isFatal(error)) {
        done = true;
        subscriber.error(error);
        return;
      }
      failures += 1;
      if (failures > maxAttempts) {
        done = true;
        subscriber.error(new Error(`the event stream dropped ${maxAttempts} times in a row; last: ${String(error)}`));
        return;
      }
      options.onConnection?.("reconnecting", seq);
      timer = setTimeout(connect, backoff(failures));
    };

    const connect = () => {
      timer = null;
      controller = new AbortController();
      const signal = controller.signal;
      let flowing = false;
      const events = transformHttpEventStream(runHttpRequest(async () => endingCleanly(await options.open(seq, signal))));
      connection = events.subscribe({
        next(event) {
          if (done) return;
          if (isSyntheticAbort(event)) {
            drop(new Error("the connection was aborted"));
            return;
          }
          seq += 1;
          if (!flowing) {
            flowing = true;
            failures = 0;
            options.onConnection?.("open", seq);
          }
          subscriber.next(event);
          if (event.type === EventType.RUN_FINISHED || event.type === EventType.RUN_ERROR) {
            done = true;
            subscriber.complete();
          }
        },
        error: (error: unknown) => drop(error),
        // The stream ends only after the run's last event; an earlier end
        // is a connection that went away.
        complete: () => drop(new Error("the event stream ended before the run did")),
      });
    };

    connect();
    return () => {
      done = true;
      if (timer) clearTimeout(timer);
      connection?.unsubscribe();
      controller?.abort();
    };
  });
}
