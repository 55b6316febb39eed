// The app's own tools (the service's frontend tool channel): sent with every
// run in `RunAgentInput.tools`; when the model calls one, the run ends with
// the call pending and the app answers it in the next request as a tool
// message after that request's user message.

import type { Tool } from "@ag-ui/client";

export const CONFIRM = "confirm_action";
export const SET_THEME = "set_theme";

export const FRONTEND_TOOLS: Tool[] = [
  {
    name: CONFIRM,
    description:
      "Ask the user to approve or deny an action before you take it. Answers {\"approved\": true|false}.",
    parameters: {
      type: "object",
      properties: {
        question: { type: "string", description: "What the user is asked to approve." },
        details: { type: "string", description: "Optional detail shown under the question." },
      },
    },
  },
  {
    name: SET_THEME,
    description: "Switch the app between light and dark (or follow the system). Answers {\"theme\": ...}.",
    parameters: {
      type: "object",
      properties: { theme: { type: "string", enum: ["light", "dark", "system"] } },
    },
  },
];

export const isFrontendTool = (name: string): boolean => FRONTEND_TOOLS.some((t) => t.name === name);

export type Theme = "light" | "dark" | "system";

const THEME_KEY = "agwire.theme";
/** Fired on `window` when the theme changes. */
export const THEME_EVENT = "agwire:theme";

export function storedTheme(): Theme {
  try {
    const value = localStorage.getItem(THEME_KEY);
    return value === "light" || value === "dark" ? value : "system";
  } catch {
    return "system";
  }
}

export function applyTheme(theme: Theme): void {
  const root = document.documentElement;
  if (theme === "system") root.removeAttribute("data-theme");
  else root.setAttribute("data-theme", theme);
  try {
    if (theme === "system") localStorage.removeItem(THEME_KEY);
    else localStorage.setItem(THEME_KEY, theme);
  } catch {
    // storage disabled: the theme lasts for the page
  }
  dispatchEvent(new Event(THEME_EVENT));
}

/** Runs `set_theme` with the model's arguments; the answer is what the model reads. */
export function runSetTheme(args: Record<string, unknown>): string {
  const wanted = args.theme;
  const theme: Theme = wanted === "light" || wanted === "dark" ? wanted : "system";
  applyTheme(theme);
  return JSON.stringify({ theme, applied: true });
}

/** Parses a tool call's arguments; anything unreadable is no arguments. */
export function parseArgs(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
