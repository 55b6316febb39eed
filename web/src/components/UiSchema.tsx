// The UiSchema 2.0 renderer (docs/ui-schema.md): every node type — stack,
// text, badge, kv, list, image, button, divider — drawn from plain data.
// Text is always text (never HTML), unknown node types are skipped, and the
// document's own limits (200 nodes, 8 levels) hold here too.

import type { JSX } from "preact";
import { formatWhen, isIsoDateTime, isZone } from "../dates";
import { dateLocale, dirOf, format, lang, langOf } from "../i18n";

export type UiAction =
  | { type: "message"; text: string }
  | { type: "link"; url: string }
  | { type: "tool"; name: string; args: Record<string, unknown> };

type Node = Record<string, unknown> & { type?: unknown };

const STATUSES = ["info", "success", "warning", "error", "pending"] as const;
const MAX_NODES = 200;
const MAX_DEPTH = 8;

const str = (value: unknown, fallback = ""): string => (typeof value === "string" ? value : fallback);
const oneOf = <T extends string>(value: unknown, allowed: readonly T[], fallback: T): T =>
  allowed.includes(value as T) ? (value as T) : fallback;

/** http(s) URLs and absolute paths only: no javascript:, no data:. */
export function safeUrl(value: unknown, allowPath: boolean): string | null {
  const url = str(value).trim();
  if (allowPath && url.startsWith("/") && !url.startsWith("//")) return url;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

export function parseAction(value: unknown): UiAction | null {
  if (!value || typeof value !== "object") return null;
  const a = value as Record<string, unknown>;
  if (a.type === "message" && typeof a.text === "string" && a.text.trim()) return { type: "message", text: a.text };
  if (a.type === "link") {
    const url = safeUrl(a.url, false);
    return url ? { type: "link", url } : null;
  }
  if (a.type === "tool" && typeof a.name === "string" && a.name) {
    const args = a.args && typeof a.args === "object" && !Array.isArray(a.args) ? (a.args as Record<string, unknown>) : {};
    return { type: "tool", name: a.name, args };
  }
  return null;
}

export interface KvRow {
  label: string;
  value: string;
  /** The ISO instant a formatted value stands for (a `<time datetime>`). */
  datetime?: string;
}

/**
 * A kv node's rows as the reader sees them: ISO date-times written in
 * `locale` and in the zone the card names (a value that is an IANA zone);
 * exactly two of them (a start and an end) become one "When" range.
 */
export function kvRows(items: unknown[], locale: string): KvRow[] {
  const rows: KvRow[] = items.map((item) => {
    const it = (item ?? {}) as Record<string, unknown>;
    return { label: str(it.label), value: str(it.value, it.value == null ? "" : String(it.value)) };
  });
  const zone = rows.find((r) => (r.value.includes("/") || r.value === "UTC") && isZone(r.value))?.value ?? null;
  const instants = rows.flatMap((r, i) => (isIsoDateTime(r.value) ? [i] : []));
  if (instants.length === 2) {
    const [a, b] = instants as [number, number];
    const start = rows[a]!.value;
    const when = { label: format(langOf(locale) ?? lang(), "card.when"), value: formatWhen(start, rows[b]!.value, locale, zone), datetime: start };
    return rows.flatMap((r, i) => (i === a ? [when] : i === b ? [] : [r]));
  }
  return rows.map((r) => (isIsoDateTime(r.value) ? { ...r, value: formatWhen(r.value, null, locale, zone), datetime: r.value } : r));
}

/**
 * The locale a card's dates are written in: the card's own (`ui_schema.locale`),
 * refined to the reader's region when they share a language (a card in
 * "en" read in en-GB writes 27 Nov), else the reader's.
 */
export function cardLocale(card: string, reader: string): string {
  if (!card) return reader;
  const primary = (tag: string) => tag.toLowerCase().split(/[-_]/)[0];
  return primary(card) === primary(reader) ? reader : card;
}

interface Ctx {
  locale: string;
  budget: number;
  onAction(action: UiAction): void;
  disabled: boolean;
}

function renderNode(node: unknown, depth: number, ctx: Ctx, key: number): JSX.Element | null {
  if (!node || typeof node !== "object" || depth > MAX_DEPTH || ctx.budget <= 0) return null;
  ctx.budget -= 1;
  const n = node as Node;
  switch (n.type) {
    case "stack": {
      const children = Array.isArray(n.children) ? n.children : [];
      const direction = oneOf(n.direction, ["vertical", "horizontal"] as const, "vertical");
      const appearance = oneOf(n.appearance, ["plain", "card"] as const, "plain");
      const gap = oneOf(n.gap, ["none", "sm", "md", "lg"] as const, "sm");
      // Consecutive buttons of a vertical stack sit side by side (wrapping).
      const drawn: JSX.Element[] = [];
      let row: JSX.Element[] = [];
      const flush = () => {
        if (row.length) drawn.push(<div key={`actions-${drawn.length}`} class="ui-actions">{row}</div>);
        row = [];
      };
      children.forEach((c, i) => {
        const el = renderNode(c, depth + 1, ctx, i);
        if (!el) return;
        if (direction === "vertical" && (c as Node)?.type === "button") row.push(el);
        else {
          flush();
          drawn.push(el);
        }
      });
      flush();
      return (
        <div key={key} class={`ui-stack ui-${direction} ui-gap-${gap}${appearance === "card" ? " ui-card" : ""}`}>
          {drawn}
        </div>
      );
    }
    case "text": {
      const role = oneOf(n.role, ["title", "subtitle", "body", "caption", "code"] as const, "body");
      const content = str(n.content);
      if (role === "title") return <div key={key} class="ui-text ui-title" role="heading" aria-level={2}>{content}</div>;
      if (role === "code") return <pre key={key} class="ui-text ui-code"><code>{content}</code></pre>;
      return <p key={key} class={`ui-text ui-${role}`}>{content}</p>;
    }
    case "badge": {
      const status = oneOf(n.status, STATUSES, "info");
      return (
        <span key={key} class={`ui-badge ui-status-${status}`}>
          {str(n.label).slice(0, 40)}
        </span>
      );
    }
    case "kv": {
      const items = Array.isArray(n.items) ? n.items : [];
      return (
        <dl key={key} class="ui-kv">
          {kvRows(items, ctx.locale).map((row, i) => (
            <div class="ui-kv-row" key={i}>
              <dt>{row.label}</dt>
              <dd>{row.datetime ? <time dateTime={row.datetime}>{row.value}</time> : row.value}</dd>
            </div>
          ))}
        </dl>
      );
    }
    case "list": {
      const items = Array.isArray(n.items) ? n.items : [];
      const children = items.map((item, i) => (
        <li key={i}>{typeof item === "string" ? item : renderNode(item, depth + 1, ctx, i)}</li>
      ));
      return n.ordered === true ? (
        <ol key={key} class="ui-list">{children}</ol>
      ) : (
        <ul key={key} class="ui-list">{children}</ul>
      );
    }
    case "image": {
      const url = safeUrl(n.url, true);
      if (!url) return null;
      return <img key={key} class="ui-image" src={url} alt={str(n.alt)} loading="lazy" referrerpolicy="no-referrer" />;
    }
    case "button": {
      const action = parseAction(n.action);
      const variant = oneOf(n.variant, ["primary", "secondary", "danger"] as const, "secondary");
      const label = str(n.label).slice(0, 80);
      return (
        <button
          key={key}
          type="button"
          class={`btn btn-${variant} ui-button`}
          disabled={!action || ctx.disabled}
          title={action?.type === "link" ? action.url : undefined}
          onClick={() => action && ctx.onAction(action)}
        >
          {label}
          {action?.type === "link" ? <span aria-hidden="true"> ↗</span> : null}
        </button>
      );
    }
    case "divider":
      return <hr key={key} class="ui-divider" />;
    default:
      return null;
  }
}

export interface UiSchemaProps {
  schema: unknown;
  onAction(action: UiAction): void;
  /** Buttons are inactive (e.g. while a run is going). */
  disabled?: boolean;
}

export function UiSchemaCard({ schema, onAction, disabled = false }: UiSchemaProps): JSX.Element | null {
  if (!schema || typeof schema !== "object") return null;
  const s = schema as Record<string, unknown>;
  const status = oneOf(s.status, STATUSES, "info");
  const theme = oneOf(s.theme, ["default", "light", "dark"] as const, "default");
  const tag = str(s.locale);
  const ctx: Ctx = { locale: cardLocale(tag, dateLocale()), budget: MAX_NODES, onAction, disabled };
  const root = renderNode(s.root, 1, ctx, 0);
  if (!root) return null;
  return (
    <section
      class={`ui-schema ui-status-${status}`}
      data-theme={theme === "default" ? undefined : theme}
      lang={tag || undefined}
      dir={tag ? dirOf(tag) : undefined}
      aria-label={format(langOf(tag) ?? lang(), "row.card")}
      data-testid="ui-card"
    >
      {root}
    </section>
  );
}
