// The thread list: newest activity first, each with its title, when it was
// last active (relative, in the reader's words) and whether a run is going
// on it; more on scroll (or the button); rename in place; delete after a
// confirmation dialog. A sidebar on wide screens, a sheet on narrow ones.

import type { JSX } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api";
import { formatAgo, formatDateTime } from "../dates";
import { dateLocale, t } from "../i18n";
import type { Thread, ThreadList } from "../threads";
import { PencilIcon, TrashIcon } from "./icons";

export const titleOf = (thread: Thread): string => thread.title || t("threads.untitled");

/** Redraws the caller when the list changes, and once a minute (relative times age). */
function useThreads(list: ThreadList): void {
  const [, setVersion] = useState(0);
  useEffect(() => {
    const bump = () => setVersion((v) => v + 1);
    const off = list.subscribe(bump);
    // A change before this subscription (the first page arriving) is drawn too.
    bump();
    const timer = setInterval(bump, 60_000);
    return () => {
      off();
      clearInterval(timer);
    };
  }, [list]);
}

export interface ThreadsProps {
  list: ThreadList;
  currentId: string | null;
  /** Threads whose run streams in this tab (besides what the server says). */
  running: ReadonlySet<string>;
  onDelete(thread: Thread, opener: HTMLElement): void;
  /** A link was followed (the sheet closes). */
  onPick?(): void;
  /** Ids unique per place the list is drawn (sidebar, sheet). */
  idPrefix: string;
}

export function Threads({ list, currentId, running, onDelete, onPick, idPrefix }: ThreadsProps): JSX.Element {
  useThreads(list);
  const sentinel = useRef<HTMLDivElement>(null);
  const [editing, setEditing] = useState<string | null>(null);

  // Scrolling to the end of the list loads the next page.
  useEffect(() => {
    const el = sentinel.current;
    if (!el || !list.nextCursor) return;
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) void list.more();
    });
    observer.observe(el);
    return () => observer.disconnect();
  }, [list, list.nextCursor]);

  const now = Date.now();
  const locale = dateLocale();
  const headingId = `${idPrefix}-threads-title`;
  return (
    <div class="threads" data-testid="threads">
      <h2 id={headingId} class="threads-title">
        {t("threads.title")}
      </h2>
      {list.error && !list.threads.length && (
        <p class="muted small threads-error" data-testid="threads-error">
          {list.error}
        </p>
      )}
      {list.loaded && !list.threads.length && !list.error && <p class="muted small">{t("threads.none")}</p>}
      <ul class="thread-list" aria-labelledby={headingId}>
        {list.threads.map((thread) => {
          const title = titleOf(thread);
          const active = Boolean(thread.activeRunId) || running.has(thread.threadId);
          const current = thread.threadId === currentId;
          return (
            <li key={thread.threadId} class={`thread${current ? " current" : ""}`} data-testid="thread" data-thread-id={thread.threadId}>
              {editing === thread.threadId ? (
                <RenameForm list={list} thread={thread} inputId={`${idPrefix}-rename`} onDone={() => setEditing(null)} />
              ) : (
                <>
                  <a href={`#/chat/${thread.threadId}`} class="thread-link" aria-current={current ? "page" : undefined} onClick={() => onPick?.()}>
                    <span class="thread-title">{title}</span>
                    <span class="thread-meta">
                      {active && (
                        <span class="thread-active" data-testid="thread-active">
                          <span class="thread-dot" aria-hidden="true" />
                          {t("threads.active")}
                          <span class="visually-hidden">, </span>
                        </span>
                      )}
                      <time dateTime={thread.lastActiveAt} title={formatDateTime(thread.lastActiveAt, locale)}>
                        {formatAgo(thread.lastActiveAt, now, locale)}
                      </time>
                    </span>
                  </a>
                  <div class="thread-actions">
                    <button type="button" class="icon-btn" aria-label={`${t("threads.rename")}: ${title}`} title={t("threads.rename")} onClick={() => setEditing(thread.threadId)}>
                      <PencilIcon />
                    </button>
                    <button
                      type="button"
                      class="icon-btn"
                      aria-label={`${t("threads.delete")}: ${title}`}
                      title={t("threads.delete")}
                      onClick={(e) => onDelete(thread, e.currentTarget as HTMLElement)}
                      data-testid="thread-delete"
                    >
                      <TrashIcon />
                    </button>
                  </div>
                </>
              )}
            </li>
          );
        })}
      </ul>
      {list.nextCursor && (
        <button type="button" class="btn btn-secondary threads-more" disabled={list.loading} onClick={() => void list.more()} data-testid="threads-more">
          {list.loading ? t("chat.loading") : t("threads.more")}
        </button>
      )}
      <div ref={sentinel} class="sentinel" />
    </div>
  );
}

function RenameForm({ list, thread, inputId, onDone }: { list: ThreadList; thread: Thread; inputId: string; onDone(): void }): JSX.Element {
  const [value, setValue] = useState(thread.titleSet ? thread.title : "");
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  const save = async () => {
    setSaving(true);
    try {
      // Empty: back to the title the server derives from the first message.
      await list.rename(thread.threadId, value.trim() ? value : null);
      onDone();
    } catch (e) {
      setError(e instanceof ApiError ? e.detail : String(e));
      setSaving(false);
    }
  };
  return (
    <form
      class="thread-rename"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
      onKeyDown={(e) => {
        if (e.key === "Escape") {
          e.preventDefault();
          onDone();
        }
      }}
    >
      <label for={inputId} class="visually-hidden">
        {t("threads.renameLabel")}
      </label>
      <input
        ref={input}
        id={inputId}
        value={value}
        placeholder={thread.title || t("threads.untitled")}
        maxLength={200}
        onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)}
        data-testid="thread-rename-input"
      />
      <div class="thread-rename-actions">
        <button type="submit" class="btn btn-primary" disabled={saving}>
          {t("threads.save")}
        </button>
        <button type="button" class="btn btn-secondary" onClick={onDone}>
          {t("threads.cancel")}
        </button>
      </div>
      {error && (
        <p class="error-text" role="alert" data-testid="thread-rename-error">
          {error}
        </p>
      )}
    </form>
  );
}

/**
 * A modal dialog (the platform's: focus stays inside, Escape closes); on
 * close, focus goes back to what opened it, or to `fallback` if that is gone.
 */
export function Modal({
  open,
  labelledBy,
  onClose,
  opener,
  className,
  children,
  testId,
}: {
  open: boolean;
  labelledBy: string;
  onClose(): void;
  opener: HTMLElement | null;
  className?: string;
  children: JSX.Element | JSX.Element[];
  testId?: string;
}): JSX.Element {
  const ref = useRef<HTMLDialogElement>(null);
  const wasOpen = useRef(false);
  /** What opened it, kept from the moment it opened (the caller may forget it on close). */
  const from = useRef<HTMLElement | null>(null);
  if (open && !wasOpen.current) from.current = opener;
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
    if (!open && wasOpen.current) {
      const back = from.current;
      if (back?.isConnected) back.focus();
      // The opener went with what it acted on (a deleted thread): "New
      // thread", once the page has drawn the thread shown next (its message
      // box is disabled while that thread loads).
      else requestAnimationFrame(() => requestAnimationFrame(() => document.querySelector<HTMLElement>("[data-testid=new-thread]")?.focus()));
    }
    wasOpen.current = open;
  }, [open]);
  return (
    <dialog
      ref={ref}
      class={className ?? "modal"}
      aria-labelledby={labelledBy}
      onCancel={(e) => {
        e.preventDefault();
        onClose();
      }}
      onClick={(e) => {
        // A click on the backdrop (the dialog itself, outside its content) closes it.
        if (e.target === ref.current) onClose();
      }}
      onKeyDown={(e) => {
        // Tab from the last control goes to the first (and back): focus never leaves for the page behind.
        if (e.key !== "Tab" || !ref.current) return;
        const controls = [...ref.current.querySelectorAll<HTMLElement>("a[href], button:not(:disabled), input, select, textarea")];
        const first = controls[0];
        const last = controls[controls.length - 1];
        if (!first || !last) return;
        if (e.shiftKey && document.activeElement === first) {
          e.preventDefault();
          last.focus();
        } else if (!e.shiftKey && document.activeElement === last) {
          e.preventDefault();
          first.focus();
        }
      }}
      data-testid={testId}
    >
      {children}
    </dialog>
  );
}

export function DeleteDialog({
  thread,
  opener,
  onCancel,
  onDeleted,
  remove,
}: {
  thread: Thread | null;
  opener: HTMLElement | null;
  onCancel(): void;
  onDeleted(thread: Thread): void;
  remove(thread: Thread): Promise<void>;
}): JSX.Element {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    setError(null);
    setBusy(false);
  }, [thread]);
  return (
    <Modal open={thread !== null} labelledBy="delete-title" onClose={onCancel} opener={opener} testId="delete-dialog">
      <h2 id="delete-title">{t("threads.deleteTitle")}</h2>
      <p>{thread ? t("threads.deleteBody", { title: titleOf(thread) }) : ""}</p>
      {error ? (
        <p class="error-text" role="alert" data-testid="delete-error">
          {error}
        </p>
      ) : (
        <></>
      )}
      <div class="form-actions">
        <button
          type="button"
          class="btn btn-danger"
          disabled={busy}
          onClick={async () => {
            if (!thread) return;
            setBusy(true);
            try {
              await remove(thread);
              onDeleted(thread);
            } catch (e) {
              setError(e instanceof ApiError ? e.detail : String(e));
              setBusy(false);
            }
          }}
        >
          {t("threads.delete")}
        </button>
        <button type="button" class="btn btn-secondary" onClick={onCancel} autoFocus>
          {t("threads.cancel")}
        </button>
      </div>
    </Modal>
  );
}
