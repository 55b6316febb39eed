// The user's threads (GET /api/v1/agent/threads): newest activity first,
// paged by an opaque cursor; rename (PATCH) and delete (DELETE) act on the
// server and then on the list, so what is shown is what the server holds.

import type { Api } from "./api";

export interface Thread {
  threadId: string;
  title: string;
  titleSet: boolean;
  createdAt: string;
  lastActiveAt: string;
  activeRunId: string | null;
  automationJobId: string | null;
}

export interface PendingToolCall {
  toolCallId: string;
  name: string;
  /** JSON text. */
  arguments: string;
  runId: string;
  askedAt: string;
  /** RFC 3339; past it the call is no longer listed and its answer is refused. Null for calls from before expiry existed. */
  expiresAt?: string | null;
}

export interface ThreadDetail extends Thread {
  pendingToolCalls: PendingToolCall[];
}

export const PAGE_SIZE = 30;

/** Newest activity first; the thread id breaks ties so the order is total. */
export function byActivity(a: Thread, b: Thread): number {
  return b.lastActiveAt.localeCompare(a.lastActiveAt) || b.threadId.localeCompare(a.threadId);
}

/** `list` with `thread` put in (replacing its older self), still newest first. */
export function upsert(list: readonly Thread[], thread: Thread): Thread[] {
  return [...list.filter((t) => t.threadId !== thread.threadId), thread].sort(byActivity);
}

/** Pages after the first merged in: a thread that moved up since is not shown twice. */
export function merge(list: readonly Thread[], page: readonly Thread[]): Thread[] {
  const seen = new Set(list.map((t) => t.threadId));
  return [...list, ...page.filter((t) => !seen.has(t.threadId))];
}

export class ThreadList {
  threads: Thread[] = [];
  nextCursor: string | null = null;
  loading = false;
  loaded = false;
  error: string | null = null;
  private listeners = new Set<() => void>();

  constructor(private readonly api: Api) {}

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }

  private page(cursor: string | null): Promise<{ threads: Thread[]; nextCursor: string | null }> {
    const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (cursor) query.set("cursor", cursor);
    return this.api.get(`/api/v1/agent/threads?${query}`);
  }

  /** The first page again (after a run, a reload): what moved up is on top. */
  async refresh(): Promise<void> {
    this.loading = true;
    this.changed();
    try {
      const first = await this.page(null);
      const pagedBeyond = this.loaded && this.threads.length > PAGE_SIZE;
      // Threads of later pages already shown stay (the first page's win);
      // the cursor still points after the last page loaded.
      this.threads = pagedBeyond ? merge(first.threads, this.threads.slice(PAGE_SIZE)).sort(byActivity) : first.threads;
      if (!pagedBeyond) this.nextCursor = first.nextCursor;
      this.loaded = true;
      this.error = null;
    } catch (e) {
      this.error = e instanceof Error ? e.message : String(e);
    } finally {
      this.loading = false;
      this.changed();
    }
  }

  /** The next page, if there is one. */
  async more(): Promise<void> {
    if (!this.nextCursor || this.loading) return;
    this.loading = true;
    this.changed();
    try {
      const next = await this.page(this.nextCursor);
      this.threads = merge(this.threads, next.threads);
      this.nextCursor = next.nextCursor;
      this.error = null;
    } catch (e) {
      this.error = e instanceof Error ? e.message : String(e);
    } finally {
      this.loading = false;
      this.changed();
    }
  }

  /** One thread as the server has it now (after a run started or ended on it). */
  async touch(threadId: string): Promise<ThreadDetail | null> {
    try {
      const thread = await this.api.get<ThreadDetail>(`/api/v1/agent/threads/${encodeURIComponent(threadId)}`);
      this.put(thread);
      return thread;
    } catch {
      return null;
    }
  }

  put(thread: Thread): void {
    const { threadId, title, titleSet, createdAt, lastActiveAt, activeRunId, automationJobId } = thread;
    this.threads = upsert(this.threads, { threadId, title, titleSet, createdAt, lastActiveAt, activeRunId, automationJobId });
    this.changed();
  }

  /** Renames (`null`: back to the derived title); throws the server's refusal. */
  async rename(threadId: string, title: string | null): Promise<void> {
    const thread = await this.api.json<Thread>("PATCH", `/api/v1/agent/threads/${encodeURIComponent(threadId)}`, { title });
    this.threads = this.threads.map((t) => (t.threadId === threadId ? thread : t));
    this.changed();
  }

  /** Deletes on the server, then from the list; throws the server's refusal. */
  async remove(threadId: string): Promise<void> {
    await this.api.json("DELETE", `/api/v1/agent/threads/${encodeURIComponent(threadId)}`);
    this.threads = this.threads.filter((t) => t.threadId !== threadId);
    this.changed();
  }
}
