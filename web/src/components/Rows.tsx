// One component per kind of row (view.ts): user bubbles with their images,
// assistant Markdown, collapsed reasoning, tool call cards, ui_schema cards.
// Each is memoized on what it draws, so a streamed token redraws one row.

import { memo } from "preact/compat";
import type { JSX } from "preact";
import { renderMarkdown } from "../markdown";
import { untilText } from "../approvals";
import { dateLocale, t } from "../i18n";
import { CONFIRM, SET_THEME, parseArgs } from "../tools";
import { sameRow, type Row } from "../view";
import { ToolIcon } from "./icons";
import { UiSchemaCard, type UiAction } from "./UiSchema";

export interface RowActions {
  onAction(action: UiAction): void;
  onConfirm(toolCallId: string, approved: boolean): void;
  /** Calls waiting for the user's decision. */
  pending: ReadonlySet<string>;
  /** When pending calls expire (ms since the epoch), for those the server said. */
  expiries: ReadonlyMap<string, number>;
  /** A run is going: cards' buttons wait. */
  busy: boolean;
  /** The app's language when drawn: a change redraws every row. */
  lang?: string;
}

function pretty(text: string | null): string {
  if (text == null) return "";
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function UserRow({ row }: { row: Extract<Row, { kind: "user" }> }): JSX.Element {
  return (
    <div class="row row-user" data-testid="user-message">
      <div class="bubble bubble-user">
        {row.images.length > 0 && (
          <div class="bubble-images">
            {row.images.map((image, i) => (
              <a
                key={image.url}
                href={image.url}
                target="_blank"
                rel="noopener noreferrer"
                class="bubble-image-link"
                aria-label={t("row.openImage", { n: i + 1 })}
              >
                <img src={image.url} alt={t("row.image", { n: i + 1 })} class="bubble-image" loading="lazy" data-testid="message-image" />
              </a>
            ))}
          </div>
        )}
        {row.text && <div class="bubble-text">{row.text}</div>}
      </div>
    </div>
  );
}

function AssistantRow({ row }: { row: Extract<Row, { kind: "assistant" }> }): JSX.Element {
  return (
    <div class="row row-assistant" data-testid="assistant-message">
      <div class="markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(row.text) }} />
    </div>
  );
}

function ReasoningRow({ row }: { row: Extract<Row, { kind: "reasoning" }> }): JSX.Element {
  return (
    <div class="row row-assistant">
      <details class="reasoning" data-testid="reasoning">
        <summary>{t("row.reasoning")}</summary>
        <div class="reasoning-text">{row.text}</div>
      </details>
    </div>
  );
}

function ConfirmCard({ row, actions }: { row: Extract<Row, { kind: "tool" }>; actions: RowActions }): JSX.Element {
  const args = parseArgs(row.args);
  const question = typeof args.question === "string" && args.question ? args.question : t("confirm.default");
  const details = typeof args.details === "string" ? args.details : "";
  const answer = row.result ? parseArgs(row.result) : null;
  const waiting = actions.pending.has(row.id);
  const expires = waiting ? actions.expiries.get(row.id) : undefined;
  return (
    <div class="row row-assistant">
      <section class="confirm" aria-label={t("confirm.label")} data-testid="confirm-card">
        <div class="confirm-question">{question}</div>
        {details && <div class="confirm-details">{details}</div>}
        {answer ? (
          <div class={`confirm-answer ${answer.approved ? "ok" : "no"}`} data-testid="confirm-answer">
            {answer.approved ? t("confirm.approved") : answer.dismissed ? t("confirm.dismissed") : t("confirm.denied")}
          </div>
        ) : waiting ? (
          <>
            <div class="confirm-buttons">
              <button type="button" class="btn btn-primary" disabled={actions.busy} onClick={() => actions.onConfirm(row.id, true)}>
                {t("confirm.approve")}
              </button>
              <button type="button" class="btn btn-secondary" disabled={actions.busy} onClick={() => actions.onConfirm(row.id, false)}>
                {t("confirm.deny")}
              </button>
            </div>
            {expires != null && (
              <div class="confirm-expiry" data-testid="confirm-expiry">
                {t("confirm.validUntil")} <time dateTime={new Date(expires).toISOString()}>{untilText(expires, Date.now(), dateLocale())}</time>
              </div>
            )}
          </>
        ) : (
          <div class="confirm-answer">{t("confirm.waiting")}</div>
        )}
      </section>
    </div>
  );
}

function ToolRow({ row }: { row: Extract<Row, { kind: "tool" }> }): JSX.Element {
  const state = row.error ? "error" : row.result == null ? "running" : "done";
  const label = row.name === SET_THEME ? "set_theme (this app)" : row.name;
  return (
    <div class="row row-assistant">
      <details class={`tool tool-${state}`} data-testid="tool-card" data-tool={row.name}>
        <summary>
          <ToolIcon />
          <span class="tool-name">{label}</span>
          <span class={`tool-state tool-state-${state}`}>{state === "running" ? t("row.running") : state === "error" ? t("row.failed") : t("row.done")}</span>
        </summary>
        <div class="tool-body">
          <div class="tool-label">{t("row.arguments")}</div>
          <pre class="tool-json">{pretty(row.args) || "{}"}</pre>
          {row.result != null && (
            <>
              <div class="tool-label">{t("row.result")}</div>
              <pre class="tool-json" data-testid="tool-result">{pretty(row.result)}</pre>
            </>
          )}
          {row.error && <div class="tool-error">{row.error}</div>}
        </div>
      </details>
    </div>
  );
}

function RowView({ row, actions }: { row: Row; actions: RowActions }): JSX.Element | null {
  switch (row.kind) {
    case "user":
      return <UserRow row={row} />;
    case "assistant":
      return <AssistantRow row={row} />;
    case "reasoning":
      return <ReasoningRow row={row} />;
    case "tool":
      if (row.name === CONFIRM) return <ConfirmCard row={row} actions={actions} />;
      return <ToolRow row={row} />;
    case "card":
      return (
        <div class="row row-assistant">
          <UiSchemaCard schema={row.schema} onAction={actions.onAction} disabled={actions.busy} />
        </div>
      );
  }
}

/** A row, redrawn only when what it shows changed. */
export const MemoRow = memo(RowView, (a, b) => {
  if (!sameRow(a.row, b.row) || a.actions.lang !== b.actions.lang) return false;
  if (a.row.kind === "tool" && a.row.name === CONFIRM) {
    return (
      a.actions.busy === b.actions.busy &&
      a.actions.pending.has(a.row.id) === b.actions.pending.has(b.row.id) &&
      a.actions.expiries.get(a.row.id) === b.actions.expiries.get(b.row.id)
    );
  }
  if (a.row.kind === "card") return a.actions.busy === b.actions.busy;
  return true;
});
