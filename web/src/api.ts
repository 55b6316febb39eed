// The service's REST API: one fetch wrapper that adds the bearer token, sends
// JSON as application/json and turns every non-2xx answer into an ApiError
// carrying the server's `detail` text as-is.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
    this.name = "ApiError";
  }
}

/** What the error text of a failed response says (`{"detail": ...}`, else the status). */
export async function errorOf(response: Response): Promise<ApiError> {
  let detail = `${response.status} ${response.statusText}`.trim();
  try {
    const body = (await response.json()) as { detail?: unknown };
    if (typeof body?.detail === "string") detail = body.detail;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, detail);
}

const TOKEN_KEY = "agwire.token";

/** The bearer token lives in sessionStorage: it stays for the tab, no longer. */
export const tokenStore = {
  get(): string | null {
    try {
      return sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return null;
    }
  },
  set(token: string | null): void {
    try {
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // storage disabled: the token lives as long as the page
    }
  },
};

export class Api {
  /** Called when the server answers 401 (the token expired or was refused). */
  onUnauthorized: (() => void) | null = null;

  constructor(public token: string | null = null) {}

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.token ? { ...extra, Authorization: `Bearer ${this.token}` } : extra;
  }

  /** A raw request with the token; non-2xx answers become ApiError. */
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = this.headers((init.headers as Record<string, string>) ?? {});
    const response = await fetch(path, { ...init, headers });
    if (!response.ok) {
      const error = await errorOf(response);
      if (response.status === 401) this.onUnauthorized?.();
      throw error;
    }
    return response;
  }

  async json<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const init: RequestInit = { method, signal, headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { ...init.headers, "Content-Type": "application/json" };
    }
    const response = await this.fetch(path, init);
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return this.json<T>("GET", path, undefined, signal);
  }
}

// --- The shapes the service answers (docs/API.md) ---

export interface Accepted {
  taskId: string;
  threadId: string;
  runId: string;
  created: boolean;
}

export interface RunStatus {
  runId: string;
  threadId: string;
  status: "queued" | "running" | "succeeded" | "failed" | "cancelled" | "interrupted";
  error: { message: string; code?: string } | null;
}

export interface HistoryAttachment {
  mimeType: string;
  url: string;
}

export type HistoryMessage =
  | {
      id: string;
      seq: number;
      role: "user";
      content: string;
      attachments: HistoryAttachment[];
      timestamp: string;
    }
  | {
      id: string;
      seq: number;
      role: "assistant";
      content: string;
      ui_schema: unknown;
      timestamp: string;
    };

export interface HistorySnapshot {
  scope: "history_day";
  threadId: string | null;
  day: string | null;
  hasMore: boolean;
  messages: HistoryMessage[];
}

export interface Profile {
  id: string;
  settings: { timezone?: string; locale?: string; [key: string]: unknown };
}

export interface Attachment {
  id: string;
  url: string;
  mimeType: string;
  size: number;
  expiresAt: string | number;
}

export interface CalendarEvent {
  id: string;
  title: string;
  start: string;
  end: string;
  event_timezone: string;
  start_utc: string;
  end_utc: string;
}

export type Schedule = { cron: string } | { every_seconds: number };

export interface Job {
  id: string;
  name: string;
  schedule: Schedule;
  timezone: string;
  prompt: string;
  config: { agent?: string; enabled_tools?: string[]; context?: { description: string; value: string }[] };
  enabled: boolean;
  threadId: string;
  nextRunAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface JobRun {
  taskId: string;
  runId: string;
  threadId: string;
  status: RunStatus["status"];
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
}
