import { EventType, type BaseEvent } from "@ag-ui/client";
import { lastValueFrom, toArray } from "rxjs";
import { describe, expect, it } from "vitest";
import { followRun } from "./stream";

const frame = (seq: number, event: object) => `id: ${seq}\ndata: ${JSON.stringify(event)}\n\n`;

const RUN: object[] = [
  { type: "RUN_STARTED", threadId: "t", runId: "r" },
  { type: "TEXT_MESSAGE_START", messageId: "m", role: "assistant" },
  { type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta: "Hel" },
  { type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta: "lo" },
  { type: "TEXT_MESSAGE_END", messageId: "m" },
  { type: "RUN_FINISHED", threadId: "t", runId: "r" },
];

/** A streaming SSE response of `run` after `after`, cut after `upTo` events (mid-frame) when given. */
function response(after: number, upTo?: number): Response {
  const encoder = new TextEncoder();
  const frames = RUN.slice(after, upTo).map((e, i) => frame(after + i + 1, e));
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const f of frames) controller.enqueue(encoder.encode(f));
      if (upTo !== undefined && upTo < RUN.length) {
        controller.enqueue(encoder.encode('id: 99\ndata: {"type":"TEXT_MES'));
        // The connection fails after what was sent has been read.
        setTimeout(() => controller.error(new TypeError("network error")), 5);
      } else {
        controller.close();
      }
    },
  });
  return new Response(stream, { status: 200, headers: { "content-type": "text/event-stream" } });
}

describe("followRun", () => {
  it("resumes after the last whole event, so each event arrives once", async () => {
    const opened: number[] = [];
    const states: string[] = [];
    const events = await lastValueFrom(
      followRun({
        open: async (after) => {
          opened.push(after);
          return opened.length === 1 ? response(after, 3) : opened.length === 2 ? response(after, 4) : response(after);
        },
        backoff: () => 1,
        onConnection: (state, after) => states.push(`${state}@${after}`),
      }).pipe(toArray()),
    );
    expect(opened).toEqual([0, 3, 4]);
    expect(events.map((e: BaseEvent) => e.type)).toEqual(RUN.map((e) => (e as BaseEvent).type));
    expect(states).toEqual(["open@1", "reconnecting@3", "open@4", "reconnecting@4", "open@5"]);
  });

  it("a stream that ends before the run did is a drop", async () => {
    const opened: number[] = [];
    const events = await lastValueFrom(
      followRun({
        open: async (after) => {
          opened.push(after);
          if (opened.length === 1) {
            const body = RUN.slice(0, 2).map((e, i) => frame(i + 1, e)).join("");
            return new Response(body, { headers: { "content-type": "text/event-stream" } });
          }
          return response(after);
        },
        backoff: () => 1,
      }).pipe(toArray()),
    );
    expect(opened).toEqual([0, 2]);
    expect(events).toHaveLength(RUN.length);
  });

  it("a 4xx is final; repeated drops give up", async () => {
    const notFound = followRun({
      open: async () => new Response(JSON.stringify({ detail: "run not found" }), { status: 404, headers: { "content-type": "application/json" } }),
      backoff: () => 1,
    });
    await expect(lastValueFrom(notFound)).rejects.toMatchObject({ status: 404 });
    let tries = 0;
    const down = followRun({
      open: async () => {
        tries += 1;
        throw new TypeError("Failed to fetch");
      },
      backoff: () => 1,
      maxAttempts: 3,
    });
    await expect(lastValueFrom(down)).rejects.toThrow(/dropped 3 times/);
    expect(tries).toBe(4);
  });

  it("stops after RUN_ERROR", async () => {
    const events = await lastValueFrom(
      followRun({
        open: async () =>
          new Response(frame(1, RUN[0]!) + frame(2, { type: EventType.RUN_ERROR, message: "boom" }), {
            headers: { "content-type": "text/event-stream" },
          }),
      }).pipe(toArray()),
    );
    expect(events.map((e) => e.type)).toEqual([EventType.RUN_STARTED, EventType.RUN_ERROR]);
  });
});
