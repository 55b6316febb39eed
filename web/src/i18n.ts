// The app's own words in English and Simplified Chinese: one table per
// language with the same keys (the compiler holds them to it), `{name}`
// placeholders, no library — the bundle has a budget. The language is the
// user's choice (kept in localStorage), else the first of
// `navigator.languages` we have, else English.

const en = {
  "nav.main": "Main",
  "nav.chat": "Chat",
  "nav.calendar": "Calendar",
  "nav.automations": "Automations",
  "nav.language": "Language",
  "nav.toLight": "Switch to light theme",
  "nav.toDark": "Switch to dark theme",
  "nav.theme": "Theme",
  "nav.signOut": "Sign out",
  "nav.skip": "Skip to the message box",
  "gate.down": "The service did not answer: {error}",
  "gate.retry": "Try again",
  "gate.title": "Sign in to agwire",
  "gate.help": "This service needs a bearer token (an HS256 JWT). It is kept for this tab only.",
  "gate.token": "Bearer token",
  "gate.continue": "Continue",
  "gate.refused": "The token was refused: {detail}",
  "gate.expired": "Your token was refused or has expired.",
  "chat.title": "Chat",
  "chat.newThread": "New thread",
  "chat.log": "Conversation",
  "chat.older": "Load the previous day",
  "chat.loading": "Loading…",
  "chat.emptyTitle": "What can I help with?",
  "chat.emptyHelp": "Ask anything, attach up to three images, or try “put lunch in my calendar tomorrow at 1pm”.",
  "chat.today": "Today",
  "chat.yesterday": "Yesterday",
  "chat.error": "Error: ",
  "chat.stopped": "Stopped.",
  "chat.couldNotStop": "Could not stop: {error}",
  "chat.runFailed": "The run failed.",
  "chat.connectionLost": "Connection lost: {error}",
  "chat.queued": "Queued: sent when the current answer ends",
  "chat.interrupting": "Stopping the current answer to send this…",
  "chat.waitingImages": "Images: {n}",
  "progress.reconnecting": "Reconnecting…",
  "progress.router": "Choosing an agent…",
  "progress.worker": "Working…",
  "progress.starting": "Starting…",
  "composer.label": "Message composer",
  "composer.message": "Message",
  "composer.placeholder": "Message the assistant…",
  "composer.attach": "Attach images",
  "composer.attachTitle": "Attach images (up to 3)",
  "composer.files": "Images to attach",
  "composer.uploading": "Uploading…",
  "composer.remove": "Remove {name}",
  "composer.preview": "Preview of {name}",
  "composer.tooMany": "At most {n} images per message.",
  "composer.send": "Send",
  "composer.stop": "Stop the run",
  "composer.stopping": "Stopping",
  "composer.busy": "The assistant is still answering. Send this now, or after it?",
  "composer.interrupt": "Interrupt",
  "composer.interruptHelp": "Stop the current answer (what it said stays) and send this now.",
  "composer.queue": "Queue",
  "composer.queueHelp": "Send this when the current answer ends.",
  "composer.keepEditing": "Keep editing",
  "row.openImage": "Open attached image {n}",
  "row.image": "Attached image {n}",
  "row.reasoning": "Reasoning",
  "row.arguments": "Arguments",
  "row.result": "Result",
  "row.running": "running…",
  "row.failed": "failed",
  "row.done": "done",
  "row.card": "Card",
  "confirm.label": "Confirmation",
  "confirm.default": "The assistant asks for your confirmation.",
  "confirm.approve": "Approve",
  "confirm.deny": "Deny",
  "confirm.approved": "Approved",
  "confirm.denied": "Denied",
  "confirm.dismissed": "Dismissed",
  "confirm.waiting": "Waiting…",
  "confirm.validUntil": "Valid until",
  "confirm.expired": "This approval expired; ask again.",
  "card.when": "When",
  "threads.title": "Threads",
  "threads.open": "Threads",
  "threads.close": "Close the thread list",
  "threads.more": "Load more threads",
  "threads.none": "No threads yet.",
  "threads.untitled": "New conversation",
  "threads.active": "Running",
  "threads.rename": "Rename",
  "threads.renameLabel": "Title of the thread",
  "threads.save": "Save",
  "threads.cancel": "Cancel",
  "threads.delete": "Delete",
  "threads.deleteTitle": "Delete this thread?",
  "threads.deleteBody": "“{title}” and its messages, runs and attachments are removed for good.",
  "threads.actions": "Actions for “{title}”",
  "threads.lastActive": "Last active {when}",
  "cal.zone": "Your time zone",
  "cal.save": "Save",
  "cal.saved": "Saved. History days and the assistant use this zone.",
  "cal.explicit": "Saved in your profile.",
  "cal.notSet": "Not set in your profile yet: history days follow UTC.",
  "cal.useDevice": "Use this device's zone ({zone})",
  "cal.range": "Date range",
  "cal.earlier": "← Earlier",
  "cal.later": "Later →",
  "cal.empty": "No events in these {n} days. Ask the assistant to add one.",
  "cal.events": "Events",
  "auto.new": "New automation",
  "auto.empty": "No automations yet. An automation runs a prompt on a schedule, on its own thread.",
  "auto.active": "Active",
  "auto.paused": "Paused",
  "auto.pause": "Pause",
  "auto.resume": "Resume",
  "auto.deleteAsk": "Delete “{name}”?",
  "auto.delete": "Delete",
  "auto.deleteMore": "Delete…",
  "auto.keep": "Keep",
  "auto.runs": "Runs",
  "auto.next": "next {when}",
  "auto.agent": "agent {agent}",
  "auto.back": "Back to automations",
  "auto.noRuns": "No runs yet.",
  "auto.pausedLower": "paused",
  "auto.name": "Name",
  "auto.prompt": "Prompt",
  "auto.schedule": "Schedule",
  "auto.every": "Every",
  "auto.interval": "Interval",
  "auto.unit": "Interval unit",
  "auto.minutes": "minutes",
  "auto.hours": "hours",
  "auto.days": "days",
  "auto.cronHelp": "minute hour day month weekday",
  "auto.cronExpr": "Cron expression",
  "auto.zone": "Time zone",
  "auto.agentLabel": "Agent",
  "auto.tools": "Tools (none ticked: the agent's own)",
  "auto.create": "Create",
  "auto.cancel": "Cancel",
};

export type MessageKey = keyof typeof en;
type Table = Record<MessageKey, string>;

const zh: Table = {
  "nav.main": "主导航",
  "nav.chat": "聊天",
  "nav.calendar": "日历",
  "nav.automations": "自动化",
  "nav.language": "语言",
  "nav.toLight": "切换到浅色主题",
  "nav.toDark": "切换到深色主题",
  "nav.theme": "主题",
  "nav.signOut": "退出登录",
  "nav.skip": "跳到消息输入框",
  "gate.down": "服务没有响应：{error}",
  "gate.retry": "重试",
  "gate.title": "登录 agwire",
  "gate.help": "此服务需要持有者令牌（HS256 JWT），仅在此标签页中保存。",
  "gate.token": "持有者令牌",
  "gate.continue": "继续",
  "gate.refused": "令牌被拒绝：{detail}",
  "gate.expired": "你的令牌被拒绝或已过期。",
  "chat.title": "聊天",
  "chat.newThread": "新对话",
  "chat.log": "对话",
  "chat.older": "加载前一天",
  "chat.loading": "加载中…",
  "chat.emptyTitle": "有什么可以帮你？",
  "chat.emptyHelp": "随便问，最多附上三张图片，或试试“明天下午1点把午饭加到我的日历”。",
  "chat.today": "今天",
  "chat.yesterday": "昨天",
  "chat.error": "错误：",
  "chat.stopped": "已停止。",
  "chat.couldNotStop": "无法停止：{error}",
  "chat.runFailed": "运行失败。",
  "chat.connectionLost": "连接中断：{error}",
  "chat.queued": "已排队：当前回答结束后发送",
  "chat.interrupting": "正在停止当前回答以发送这条…",
  "chat.waitingImages": "图片：{n} 张",
  "progress.reconnecting": "正在重新连接…",
  "progress.router": "正在选择助手…",
  "progress.worker": "处理中…",
  "progress.starting": "正在开始…",
  "composer.label": "消息编辑器",
  "composer.message": "消息",
  "composer.placeholder": "给助手发消息…",
  "composer.attach": "附加图片",
  "composer.attachTitle": "附加图片（最多 3 张）",
  "composer.files": "要附加的图片",
  "composer.uploading": "上传中…",
  "composer.remove": "移除 {name}",
  "composer.preview": "{name} 的预览",
  "composer.tooMany": "每条消息最多 {n} 张图片。",
  "composer.send": "发送",
  "composer.stop": "停止运行",
  "composer.stopping": "正在停止",
  "composer.busy": "助手还在回答。现在发送，还是等它答完？",
  "composer.interrupt": "打断",
  "composer.interruptHelp": "停止当前回答（已说的内容保留），立即发送这条。",
  "composer.queue": "排队",
  "composer.queueHelp": "当前回答结束后再发送这条。",
  "composer.keepEditing": "继续编辑",
  "row.openImage": "打开附图 {n}",
  "row.image": "附图 {n}",
  "row.reasoning": "推理过程",
  "row.arguments": "参数",
  "row.result": "结果",
  "row.running": "运行中…",
  "row.failed": "失败",
  "row.done": "完成",
  "row.card": "卡片",
  "confirm.label": "确认",
  "confirm.default": "助手请求你的确认。",
  "confirm.approve": "批准",
  "confirm.deny": "拒绝",
  "confirm.approved": "已批准",
  "confirm.denied": "已拒绝",
  "confirm.dismissed": "已忽略",
  "confirm.waiting": "等待中…",
  "confirm.validUntil": "有效期至",
  "confirm.expired": "此确认已过期，请重新提问。",
  "card.when": "时间",
  "threads.title": "对话",
  "threads.open": "对话列表",
  "threads.close": "关闭对话列表",
  "threads.more": "加载更多对话",
  "threads.none": "还没有对话。",
  "threads.untitled": "新的对话",
  "threads.active": "运行中",
  "threads.rename": "重命名",
  "threads.renameLabel": "对话标题",
  "threads.save": "保存",
  "threads.cancel": "取消",
  "threads.delete": "删除",
  "threads.deleteTitle": "删除这个对话？",
  "threads.deleteBody": "“{title}”及其消息、运行记录和附件将被永久删除。",
  "threads.actions": "“{title}”的操作",
  "threads.lastActive": "最后活动 {when}",
  "cal.zone": "你的时区",
  "cal.save": "保存",
  "cal.saved": "已保存。历史记录的日期和助手都使用这个时区。",
  "cal.explicit": "已保存在你的个人资料中。",
  "cal.notSet": "个人资料中尚未设置：历史记录按 UTC 分日。",
  "cal.useDevice": "使用此设备的时区（{zone}）",
  "cal.range": "日期范围",
  "cal.earlier": "← 更早",
  "cal.later": "更晚 →",
  "cal.empty": "这 {n} 天没有日程。可以让助手添加一个。",
  "cal.events": "日程",
  "auto.new": "新建自动化",
  "auto.empty": "还没有自动化。自动化会按计划在自己的对话中运行一个提示。",
  "auto.active": "启用中",
  "auto.paused": "已暂停",
  "auto.pause": "暂停",
  "auto.resume": "恢复",
  "auto.deleteAsk": "删除“{name}”？",
  "auto.delete": "删除",
  "auto.deleteMore": "删除…",
  "auto.keep": "保留",
  "auto.runs": "运行记录",
  "auto.next": "下次 {when}",
  "auto.agent": "助手 {agent}",
  "auto.back": "返回自动化",
  "auto.noRuns": "还没有运行记录。",
  "auto.pausedLower": "已暂停",
  "auto.name": "名称",
  "auto.prompt": "提示",
  "auto.schedule": "计划",
  "auto.every": "每隔",
  "auto.interval": "间隔",
  "auto.unit": "间隔单位",
  "auto.minutes": "分钟",
  "auto.hours": "小时",
  "auto.days": "天",
  "auto.cronHelp": "分 时 日 月 周",
  "auto.cronExpr": "Cron 表达式",
  "auto.zone": "时区",
  "auto.agentLabel": "助手",
  "auto.tools": "工具（都不勾选：使用助手自己的）",
  "auto.create": "创建",
  "auto.cancel": "取消",
};

export type Lang = "en" | "zh-CN";
export const LANGS: { lang: Lang; name: string }[] = [
  { lang: "en", name: "English" },
  { lang: "zh-CN", name: "简体中文" },
];
const TABLES: Record<Lang, Table> = { en, "zh-CN": zh };

/** The table for a BCP 47 tag: any Chinese is Simplified Chinese, any English is English. */
export function langOf(tag: string | null | undefined): Lang | null {
  const primary = (tag ?? "").toLowerCase().split(/[-_]/)[0];
  if (primary === "zh") return "zh-CN";
  if (primary === "en") return "en";
  return null;
}

/** The first of the browser's languages we have a table for, else English. */
export function pickLang(languages: readonly string[]): Lang {
  for (const tag of languages) {
    const lang = langOf(tag);
    if (lang) return lang;
  }
  return "en";
}

/** `{name}` placeholders filled from `vars`; a missing one stays as written. */
export function format(lang: Lang, key: MessageKey, vars: Record<string, string | number> = {}): string {
  return TABLES[lang][key].replace(/\{(\w+)\}/g, (whole, name: string) => (name in vars ? String(vars[name]) : whole));
}

/** Right-to-left scripts: Arabic, Hebrew, Persian, Urdu. */
export function dirOf(tag: string): "rtl" | "ltr" {
  return ["ar", "he", "iw", "fa", "ur"].includes(tag.toLowerCase().split(/[-_]/)[0] ?? "") ? "rtl" : "ltr";
}

// --- the page's current language ---

const LANG_KEY = "agwire.locale";
/** Fired on `window` when the language changes. */
export const LANG_EVENT = "agwire:locale";

function browserLanguages(): readonly string[] {
  return typeof navigator === "undefined" ? [] : navigator.languages?.length ? navigator.languages : [navigator.language];
}

function stored(): Lang | null {
  try {
    const value = localStorage.getItem(LANG_KEY);
    return value === "en" || value === "zh-CN" ? value : null;
  } catch {
    return null;
  }
}

let current: Lang = stored() ?? pickLang(browserLanguages());

export function lang(): Lang {
  return current;
}

/**
 * The locale dates and numbers are written in: the browser's own tag when
 * it is of the chosen language (en-GB keeps its day-month order), else the
 * language's tag.
 */
export function dateLocale(): string {
  const own = browserLanguages().find((tag) => langOf(tag) === current);
  return own ?? current;
}

export function t(key: MessageKey, vars?: Record<string, string | number>): string {
  return format(current, key, vars);
}

/** Sets `<html lang>` and, when `remember`, keeps the choice. */
export function applyLang(next: Lang, remember: boolean): void {
  current = next;
  if (typeof document !== "undefined") document.documentElement.lang = next;
  if (remember) {
    try {
      localStorage.setItem(LANG_KEY, next);
    } catch {
      // storage disabled: the choice lasts for the page
    }
  }
  if (typeof dispatchEvent === "function") dispatchEvent(new Event(LANG_EVENT));
}
