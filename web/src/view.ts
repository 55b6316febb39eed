// From AG-UI messages to what the chat shows. History (GET
// /api/v1/agent/history) is first turned into the same AG-UI messages a live
// run produces — an assistant message, then its `ui_schema` as an
// `activity` message — so one renderer draws both and a card from history
// looks exactly like a live one.

import type { Message } from "@ag-ui/client";
import type { HistoryMessage } from "./api";

export const UI_SCHEMA = "ui_schema";

export interface ImageRef {
  url: string;
  mimeType: string;
}

/** `at`: the index of the message the row comes from. */
export type Row = { at: number } & (
  | { kind: "user"; id: string; text: string; images: ImageRef[] }
  | { kind: "assistant"; id: string; text: string }
  | { kind: "reasoning"; id: string; text: string }
  | { kind: "tool"; id: string; name: string; args: string; result: string | null; error: string | null }
  | { kind: "card"; id: string; schema: unknown }
);

/** History messages as the AG-UI messages a live run would have produced. */
export function fromHistory(messages: HistoryMessage[]): Message[] {
  const out: Message[] = [];
  for (const m of messages) {
    if (m.role === "user") {
      const attachments = m.attachments ?? [];
      out.push({
        id: m.id,
        role: "user",
        content:
          attachments.length === 0
            ? m.content
            : [
                ...(m.content ? [{ type: "text" as const, text: m.content }] : []),
                ...attachments.map((a) => ({
                  type: "image" as const,
                  source: { type: "url" as const, value: a.url, mimeType: a.mimeType },
                })),
              ],
      });
    } else if (m.role === "assistant") {
      if (m.content) out.push({ id: m.id, role: "assistant", content: m.content });
      if (m.ui_schema && typeof m.ui_schema === "object") {
        out.push({
          id: `${m.id}:ui`,
          role: "activity",
          activityType: UI_SCHEMA,
          content: m.ui_schema as Record<string, unknown>,
        });
      }
    }
  }
  return out;
}

function userParts(content: unknown): { text: string; images: ImageRef[] } {
  if (typeof content === "string") return { text: content, images: [] };
  const texts: string[] = [];
  const images: ImageRef[] = [];
  if (Array.isArray(content)) {
    for (const part of content as Record<string, unknown>[]) {
      if (part?.type === "text" && typeof part.text === "string") texts.push(part.text);
      const source = part?.source as { type?: string; value?: string; mimeType?: string } | undefined;
      if (part?.type === "image" && source?.type === "url" && typeof source.value === "string") {
        images.push({ url: source.value, mimeType: source.mimeType ?? "image/*" });
      }
      if (part?.type === "binary" && typeof part.url === "string") {
        images.push({ url: part.url, mimeType: String(part.mimeType ?? "image/*") });
      }
    }
  }
  return { text: texts.join("\n"), images };
}

function text(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return (content as { type?: string; text?: string }[])
      .filter((p) => p?.type === "text" && typeof p.text === "string")
      .map((p) => p.text)
      .join("\n");
  }
  return "";
}

/** The rows to draw, in order: tool results are folded into their call's row. */
export function toRows(messages: readonly Message[]): Row[] {
  const results = new Map<string, { content: string; error: string | null }>();
  for (const m of messages) {
    if (m.role === "tool") results.set(m.toolCallId, { content: text(m.content), error: m.error ?? null });
  }
  const rows: Row[] = [];
  for (const [at, m] of messages.entries()) {
    switch (m.role) {
      case "user": {
        const { text: t, images } = userParts(m.content);
        rows.push({ at, kind: "user", id: m.id, text: t, images });
        break;
      }
      case "assistant": {
        if (m.content) rows.push({ at, kind: "assistant", id: m.id, text: m.content });
        for (const call of m.toolCalls ?? []) {
          const result = results.get(call.id);
          rows.push({
            at,
            kind: "tool",
            id: call.id,
            name: call.function.name,
            args: call.function.arguments,
            result: result?.content ?? null,
            error: result?.error ?? null,
          });
        }
        break;
      }
      case "reasoning":
        rows.push({ at, kind: "reasoning", id: m.id, text: m.content });
        break;
      case "activity":
        if (m.activityType === UI_SCHEMA) rows.push({ at, kind: "card", id: m.id, schema: m.content });
        break;
      default:
        break;
    }
  }
  return rows;
}

/** Whether two rows draw the same (the list re-renders only rows that differ). */
export function sameRow(a: Row, b: Row): boolean {
  if (a.kind !== b.kind || a.id !== b.id) return false;
  switch (a.kind) {
    case "user": {
      const o = b as typeof a;
      return a.text === o.text && a.images.length === o.images.length && a.images.every((im, i) => im.url === o.images[i]?.url);
    }
    case "assistant":
    case "reasoning":
      return a.text === (b as typeof a).text;
    case "tool": {
      const o = b as typeof a;
      return a.name === o.name && a.args === o.args && a.result === o.result && a.error === o.error;
    }
    case "card":
      return a.schema === (b as typeof a).schema || JSON.stringify(a.schema) === JSON.stringify((b as typeof a).schema);
  }
}
