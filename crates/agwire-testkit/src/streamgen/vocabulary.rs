//! The words generated events are made of.

pub(super) const FRAGMENTS: &[&str] = &[
    "Hello",
    " world",
    "The",
    " quick",
    " brown",
    " fox",
    ",",
    ".",
    " ",
    "",
    "",
    "naïve",
    " café",
    " 日本語",
    " 中文字符",
    " русский",
    " עברית",
    " العربية",
    " 🙂",
    "👩‍👩‍👧",
    " 𝄞",
    " \u{1F600}",
    "line\nbreak",
    "\ttab",
    " \"quoted\"",
    " back\\slash",
    " <b>&amp;</b>",
    "e\u{301}",
    " \u{200B}",
    " 0",
    " {\"not\":\"json\"}",
    " ~/a/b",
    " %s %d",
    "\u{7f}",
    "\u{0}",
    " \u{FEFF}",
    " ∑∫√",
];
pub(super) const TOOL_NAMES: &[&str] = &[
    "search",
    "get_weather",
    "calculator",
    "lookup_user",
    "send_email",
    "read_file",
    "工具",
    "render_chart",
];
pub(super) const STEP_NAMES: &[&str] = &[
    "plan",
    "tools",
    "act",
    "reflect",
    "summarize",
    "retrieve",
    "步骤",
];
pub(super) const SUBAGENT_NAMES: &[&str] = &["researcher", "coder", "critic", "planner", "翻译"];
pub(super) const ACTIVITY_TYPES: &[&str] = &["PLAN", "SEARCH_PROGRESS", "progress", "a2ui-surface"];
pub(super) const CUSTOM_NAMES: &[&str] =
    &["PredictState", "on_interrupt", "acme:ping", "app.telemetry"];
pub(super) const SPEAKERS: &[&str] = &["alice", "Bob", "assistant-2", "Zoë"];
pub(super) const TEXT_ROLES: &[&str] = &["assistant", "user", "system", "developer"];
