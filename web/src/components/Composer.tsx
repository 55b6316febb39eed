// The composer: a growing text box (Enter sends, Shift+Enter breaks the
// line), up to three images uploaded as soon as they are picked (previews,
// and the server's refusal shown word for word), Send, and Stop while a
// run is going. Sending while a run goes asks first what becomes of it:
// Interrupt (it stops, what it said stays, this turn runs) or Queue (this
// turn runs after it).

import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { JSX } from "preact";
import { ApiError, type Api, type Attachment } from "../api";
import type { BusyStrategy, UploadedImage } from "../chat";
import { t } from "../i18n";
import { CloseIcon, ImageIcon, SendIcon, StopIcon } from "./icons";

export const MAX_IMAGES = 3;

interface Pick {
  key: number;
  name: string;
  preview: string;
  state: "uploading" | "ready" | "error";
  uploaded?: UploadedImage;
  error?: string;
}

export interface ComposerProps {
  api: Api;
  /** The thread is still loading: nothing can be sent to it yet. */
  loading: boolean;
  running: boolean;
  stopping: boolean;
  /** `strategy`: sent while a run goes, what becomes of that run. */
  onSend(text: string, images: UploadedImage[], strategy?: BusyStrategy): void;
  onStop(): void;
}

let nextKey = 1;

export function Composer({ api, loading, running, stopping, onSend, onStop }: ComposerProps): JSX.Element {
  const [text, setText] = useState("");
  const [picks, setPicks] = useState<Pick[]>([]);
  const [notice, setNotice] = useState<string | null>(null);
  /** Sent while a run goes: the choice between Interrupt and Queue is open. */
  const [choosing, setChoosing] = useState(false);
  const box = useRef<HTMLTextAreaElement>(null);
  const file = useRef<HTMLInputElement>(null);
  const choice = useRef<HTMLDivElement>(null);
  const live = useRef(picks);
  live.current = picks;

  useEffect(() => () => live.current.forEach((p) => URL.revokeObjectURL(p.preview)), []);

  // The choice takes focus as it opens, before the next key (Enter picks Interrupt, Tab reaches Queue).
  useLayoutEffect(() => {
    if (choosing) choice.current?.querySelector("button")?.focus();
  }, [choosing]);

  // The run ended while the user chose: nothing is left to choose, Enter sends plainly.
  useEffect(() => {
    if (running || !choosing) return;
    const focused = choice.current?.contains(document.activeElement) ?? false;
    setChoosing(false);
    if (focused) box.current?.focus();
  }, [running, choosing]);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 220)}px`;
  }, [text]);

  const update = (key: number, change: Partial<Pick>) =>
    setPicks((all) => all.map((p) => (p.key === key ? { ...p, ...change } : p)));

  const upload = async (key: number, f: File) => {
    try {
      const response = await api.fetch("/api/v1/agent/attachments", {
        method: "POST",
        headers: { "Content-Type": f.type || "application/octet-stream" },
        body: f,
      });
      const a = (await response.json()) as Attachment;
      update(key, { state: "ready", uploaded: { url: a.url, mimeType: a.mimeType, filename: f.name } });
    } catch (error) {
      update(key, { state: "error", error: error instanceof ApiError ? error.detail : String((error as Error).message) });
    }
  };

  const add = (files: FileList | null) => {
    if (!files) return;
    setNotice(null);
    const room = MAX_IMAGES - picks.filter((p) => p.state !== "error").length;
    const chosen = Array.from(files);
    if (chosen.length > room) setNotice(t("composer.tooMany", { n: MAX_IMAGES }));
    const added = chosen.slice(0, Math.max(room, 0)).map((f) => {
      const pick: Pick = { key: nextKey++, name: f.name, preview: URL.createObjectURL(f), state: "uploading" };
      void upload(pick.key, f);
      return pick;
    });
    setPicks((all) => [...all, ...added]);
    if (file.current) file.current.value = "";
  };

  const remove = (key: number) => {
    setPicks((all) => {
      const gone = all.find((p) => p.key === key);
      if (gone) URL.revokeObjectURL(gone.preview);
      return all.filter((p) => p.key !== key);
    });
    setNotice(null);
  };

  const uploading = picks.some((p) => p.state === "uploading");
  const ready = picks.filter((p) => p.state === "ready" && p.uploaded).map((p) => p.uploaded!);
  const canSend = !loading && !uploading && (text.trim().length > 0 || ready.length > 0);

  const send = (strategy?: BusyStrategy) => {
    if (!canSend) return;
    if (running && !strategy) {
      setChoosing(true);
      return;
    }
    onSend(text, ready, running ? strategy : undefined);
    setText("");
    picks.forEach((p) => URL.revokeObjectURL(p.preview));
    setPicks([]);
    setNotice(null);
    setChoosing(false);
    box.current?.focus();
  };

  const keepEditing = () => {
    setChoosing(false);
    box.current?.focus();
  };

  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  };

  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        send();
      }}
      aria-label={t("composer.label")}
    >
      {choosing && running && (
        <div
          ref={choice}
          class="busy-choice"
          role="group"
          aria-labelledby="busy-choice-title"
          data-testid="busy-choice"
          onKeyDown={(e) => {
            if (e.key === "Escape") {
              e.preventDefault();
              keepEditing();
            }
          }}
        >
          <span id="busy-choice-title" class="busy-choice-title">
            {t("composer.busy")}
          </span>
          <button type="button" class="btn btn-primary" onClick={() => send("interrupt")} aria-describedby="busy-interrupt-help" title={t("composer.interruptHelp")} data-testid="send-interrupt">
            {t("composer.interrupt")}
          </button>
          <span id="busy-interrupt-help" class="visually-hidden">
            {t("composer.interruptHelp")}
          </span>
          <button type="button" class="btn" onClick={() => send("enqueue")} aria-describedby="busy-queue-help" title={t("composer.queueHelp")} data-testid="send-queue">
            {t("composer.queue")}
          </button>
          <span id="busy-queue-help" class="visually-hidden">
            {t("composer.queueHelp")}
          </span>
          <button type="button" class="btn btn-quiet" onClick={keepEditing}>
            {t("composer.keepEditing")}
          </button>
        </div>
      )}
      {(picks.length > 0 || notice) && (
        <div class="picks" aria-live="polite">
          {picks.map((p) => (
            <div key={p.key} class={`pick pick-${p.state}`} data-testid="attachment-preview">
              <img src={p.preview} alt={t("composer.preview", { name: p.name })} />
              {p.state === "uploading" && <span class="pick-status">{t("composer.uploading")}</span>}
              {p.state === "error" && (
                <span class="pick-error" role="alert" data-testid="attachment-error">
                  {p.error}
                </span>
              )}
              <button type="button" class="pick-remove" aria-label={t("composer.remove", { name: p.name })} onClick={() => remove(p.key)}>
                <CloseIcon />
              </button>
            </div>
          ))}
          {notice && (
            <span class="pick-notice" role="alert">
              {notice}
            </span>
          )}
        </div>
      )}
      <div class="composer-row">
        <input
          ref={file}
          id="attach"
          type="file"
          accept="image/png,image/jpeg,image/gif,image/webp"
          multiple
          class="visually-hidden"
          tabIndex={-1}
          aria-label={t("composer.files")}
          onChange={(e) => add((e.currentTarget as HTMLInputElement).files)}
          data-testid="file-input"
        />
        <button
          type="button"
          class="icon-btn"
          aria-label={t("composer.attach")}
          title={t("composer.attachTitle")}
          disabled={picks.length >= MAX_IMAGES}
          onClick={() => file.current?.click()}
        >
          <ImageIcon />
        </button>
        <label for="message" class="visually-hidden">
          {t("composer.message")}
        </label>
        <textarea
          ref={box}
          id="message"
          rows={1}
          placeholder={t("composer.placeholder")}
          value={text}
          onInput={(e) => setText((e.currentTarget as HTMLTextAreaElement).value)}
          onKeyDown={onKeyDown}
          maxLength={10000}
          // Read-only, not disabled, while the thread loads: it can still take
          // focus (the skip link lands on it), and nothing typed is lost.
          readOnly={loading}
          aria-busy={loading}
        />
        {running && (
          <button type="button" class="send stop" onClick={onStop} disabled={stopping} aria-label={stopping ? t("composer.stopping") : t("composer.stop")}>
            <StopIcon />
          </button>
        )}
        <button type="submit" class="send" disabled={!canSend} aria-label={t("composer.send")}>
          <SendIcon />
        </button>
      </div>
    </form>
  );
}
