//! `ui_hints` → the agent-run API's `UiSchemaRenderer` (`version: "2.0"`), the
//! structure a front end renders under an assistant message. The node set
//! is specified in `docs/ui-schema.md`.
//!
//! Hints come from a model (the `render_ui` tool) and from tools (a created
//! calendar event), so they are untrusted: the compiler keeps what is valid,
//! drops what is not with a warning, clamps sizes, and never fails a run —
//! the worst outcome is no UI.

use serde_json::{Map, Value, json};

/// The schema version the front end expects.
pub const VERSION: &str = "2.0";
/// Deepest node nesting kept.
pub const MAX_DEPTH: usize = 8;
/// Most nodes in one schema.
pub const MAX_NODES: usize = 200;
/// Longest text kept (characters); longer is cut with an ellipsis.
pub const MAX_TEXT: usize = 4000;

const STATUSES: [&str; 5] = ["info", "success", "warning", "error", "pending"];
const THEMES: [&str; 3] = ["default", "light", "dark"];
const TEXT_ROLES: [&str; 5] = ["title", "subtitle", "body", "caption", "code"];
const META_KEYS: [&str; 4] = ["requestId", "toolId", "traceId", "userId"];

/// What compiling produced: the schema (if anything survived) and what was
/// dropped, for the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    /// The `UiSchemaRenderer`, or `None` when no hint held a valid node.
    pub schema: Option<Value>,
    /// What was dropped or changed, and where.
    pub warnings: Vec<String>,
}

/// Compiles one turn's hints (in the order they were produced) into one
/// schema. One hint becomes its card; several become a vertical stack of
/// them. `locale` is the user's (profile or default).
pub fn compile(hints: &[Value], locale: &str) -> Compiled {
    let mut cx = Cx::default();
    let mut cards = Vec::new();
    let mut status = None;
    for (i, hint) in hints.iter().enumerate() {
        cx.at = format!("hints[{i}]");
        let Some(hint) = hint.as_object() else {
            cx.warn("a hint must be an object");
            continue;
        };
        if let Some(s) = hint.get("status") {
            match s.as_str().filter(|s| STATUSES.contains(s)) {
                // The last hint that states a status wins: tools come last.
                Some(s) => status = Some(s.to_owned()),
                None => cx.warn("status must be one of info, success, warning, error, pending"),
            }
        }
        if let Some(card) = cx.hint(hint) {
            cards.push(card);
        }
    }
    let root = match cards.len() {
        0 => {
            return Compiled {
                schema: None,
                warnings: cx.warnings,
            };
        }
        1 => cards.pop().unwrap_or(Value::Null),
        _ => json!({"type": "stack", "direction": "vertical", "gap": "md", "children": cards}),
    };
    let theme = hints
        .iter()
        .filter_map(|h| h.get("theme").and_then(Value::as_str))
        .rfind(|t| THEMES.contains(t))
        .unwrap_or("default");
    let mut meta = Map::new();
    for hint in hints {
        if let Some(Value::Object(m)) = hint.get("meta") {
            for key in META_KEYS {
                if let Some(Value::String(v)) = m.get(key) {
                    meta.insert(key.to_owned(), Value::String(clip(v, 200)));
                }
            }
        }
    }
    let mut schema = json!({
        "version": VERSION,
        "locale": locale,
        "status": status.unwrap_or_else(|| "info".to_owned()),
        "theme": theme,
        "root": root,
    });
    if !meta.is_empty() {
        schema["meta"] = Value::Object(meta);
    }
    Compiled {
        schema: Some(schema),
        warnings: cx.warnings,
    }
}

#[derive(Default)]
struct Cx {
    at: String,
    nodes: usize,
    warnings: Vec<String>,
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

impl Cx {
    fn warn(&mut self, why: &str) {
        self.warnings.push(format!("{}: {why}", self.at));
    }

    fn text(&mut self, value: &Value, what: &str) -> Option<String> {
        match value {
            Value::String(s) if !s.trim().is_empty() => {
                if s.chars().count() > MAX_TEXT {
                    self.warn(&format!("{what} cut to {MAX_TEXT} characters"));
                }
                Some(clip(s, MAX_TEXT))
            }
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => {
                self.warn(&format!("{what} must be a non-empty string"));
                None
            }
        }
    }

    fn count(&mut self) -> bool {
        if self.nodes >= MAX_NODES {
            self.warn(&format!("more than {MAX_NODES} nodes; the rest is dropped"));
            return false;
        }
        self.nodes += 1;
        true
    }

    /// A hint: shortcuts (`title`, `badge`, `body`, `fields`, `image`,
    /// `actions`) and free `blocks`, as one card.
    fn hint(&mut self, hint: &Map<String, Value>) -> Option<Value> {
        let mut children = Vec::new();
        let base = self.at.clone();
        let mut push = |cx: &mut Self, node: Option<Value>| {
            if let Some(node) = node {
                children.push(node);
            }
            cx.at.clone_from(&base);
        };
        if let Some(title) = hint.get("title") {
            self.at = format!("{base}.title");
            let node = self
                .text(title, "title")
                .filter(|_| self.count())
                .map(|t| json!({"type": "text", "content": t, "role": "title"}));
            push(self, node);
        }
        if let Some(badge) = hint.get("badge") {
            self.at = format!("{base}.badge");
            let status = hint
                .get("status")
                .and_then(Value::as_str)
                .filter(|s| STATUSES.contains(s))
                .unwrap_or("info");
            let node = self
                .text(badge, "badge")
                .filter(|_| self.count())
                .map(|label| json!({"type": "badge", "label": clip(&label, 40), "status": status}));
            push(self, node);
        }
        if let Some(body) = hint.get("body") {
            self.at = format!("{base}.body");
            let node = self
                .text(body, "body")
                .filter(|_| self.count())
                .map(|t| json!({"type": "text", "content": t, "role": "body"}));
            push(self, node);
        }
        if let Some(fields) = hint.get("fields") {
            self.at = format!("{base}.fields");
            let node = self.fields(fields);
            push(self, node);
        }
        if let Some(image) = hint.get("image") {
            self.at = format!("{base}.image");
            let node = self.node(&json!({"type": "image", "url": image, "alt": hint.get("title").cloned().unwrap_or(Value::Null)}), 1);
            push(self, node);
        }
        if let Some(blocks) = hint.get("blocks") {
            match blocks.as_array() {
                Some(blocks) => {
                    for (i, block) in blocks.iter().enumerate() {
                        self.at = format!("{base}.blocks[{i}]");
                        let node = self.node(block, 1);
                        push(self, node);
                    }
                }
                None => {
                    self.at = format!("{base}.blocks");
                    self.warn("blocks must be an array");
                    self.at.clone_from(&base);
                }
            }
        }
        if let Some(actions) = hint.get("actions") {
            match actions.as_array() {
                Some(actions) => {
                    for (i, action) in actions.iter().enumerate() {
                        self.at = format!("{base}.actions[{i}]");
                        let mut button = action.clone();
                        if let Some(b) = button.as_object_mut() {
                            b.insert("type".into(), "button".into());
                        }
                        let node = self.node(&button, 1);
                        push(self, node);
                    }
                }
                None => {
                    self.at = format!("{base}.actions");
                    self.warn("actions must be an array");
                    self.at.clone_from(&base);
                }
            }
        }
        if children.is_empty() {
            self.warn("no valid content");
            return None;
        }
        Some(
            json!({"type": "stack", "appearance": "card", "direction": "vertical", "gap": "sm", "children": children}),
        )
    }

    fn fields(&mut self, fields: &Value) -> Option<Value> {
        let pairs: Vec<(String, Value)> = match fields {
            Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Value::Array(items) => items
                .iter()
                .filter_map(|item| {
                    Some((
                        item.get("label")?.as_str()?.to_owned(),
                        item.get("value")?.clone(),
                    ))
                })
                .collect(),
            _ => {
                self.warn("fields must be an object or a list of {label, value}");
                return None;
            }
        };
        self.node(
            &json!({"type": "kv", "items": pairs.into_iter().map(|(label, value)| json!({"label": label, "value": value})).collect::<Vec<_>>()}),
            1,
        )
    }

    /// One node of the tree, checked against the node set.
    fn node(&mut self, node: &Value, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            self.warn(&format!("nested deeper than {MAX_DEPTH}; dropped"));
            return None;
        }
        let Some(kind) = node.get("type").and_then(Value::as_str) else {
            self.warn("a node needs a string type");
            return None;
        };
        if !self.count() {
            return None;
        }
        let base = self.at.clone();
        let field = |name: &str| node.get(name).unwrap_or(&Value::Null);
        let one_of = |name: &str, allowed: &[&str], default: &str| -> String {
            field(name)
                .as_str()
                .filter(|v| allowed.contains(v))
                .unwrap_or(default)
                .to_owned()
        };
        let built = match kind {
            "stack" => {
                let mut children = Vec::new();
                if let Some(items) = field("children").as_array() {
                    for (i, child) in items.iter().enumerate() {
                        self.at = format!("{base}.children[{i}]");
                        if let Some(child) = self.node(child, depth + 1) {
                            children.push(child);
                        }
                    }
                    self.at.clone_from(&base);
                }
                if children.is_empty() {
                    self.warn("a stack needs at least one valid child");
                    return None;
                }
                json!({
                    "type": "stack",
                    "direction": one_of("direction", &["vertical", "horizontal"], "vertical"),
                    "appearance": one_of("appearance", &["plain", "card"], "plain"),
                    "gap": one_of("gap", &["none", "sm", "md", "lg"], "sm"),
                    "children": children,
                })
            }
            "text" => {
                let content = self.text(field("content"), "text content")?;
                json!({"type": "text", "content": content, "role": one_of("role", &TEXT_ROLES, "body")})
            }
            "badge" => {
                let label = self.text(field("label"), "badge label")?;
                json!({"type": "badge", "label": clip(&label, 40), "status": one_of("status", &STATUSES, "info")})
            }
            "kv" => {
                let mut items = Vec::new();
                for item in field("items").as_array().into_iter().flatten() {
                    let label = item.get("label").and_then(Value::as_str);
                    let value = item.get("value").map(|v| match v {
                        Value::String(s) => Some(clip(s, MAX_TEXT)),
                        Value::Number(n) => Some(n.to_string()),
                        Value::Bool(b) => Some(b.to_string()),
                        _ => None,
                    });
                    match (label, value) {
                        (Some(label), Some(Some(value))) if !label.is_empty() => {
                            items.push(json!({"label": clip(label, 200), "value": value}));
                        }
                        _ => self.warn("a kv item needs a label and a scalar value"),
                    }
                }
                if items.is_empty() {
                    self.warn("a kv list needs at least one valid item");
                    return None;
                }
                json!({"type": "kv", "items": items})
            }
            "list" => {
                let mut items = Vec::new();
                for (i, item) in field("items").as_array().into_iter().flatten().enumerate() {
                    self.at = format!("{base}.items[{i}]");
                    let node = match item {
                        Value::String(_) => {
                            self.node(&json!({"type": "text", "content": item}), depth + 1)
                        }
                        _ => self.node(item, depth + 1),
                    };
                    if let Some(node) = node {
                        items.push(node);
                    }
                }
                self.at.clone_from(&base);
                if items.is_empty() {
                    self.warn("a list needs at least one valid item");
                    return None;
                }
                json!({"type": "list", "ordered": field("ordered").as_bool().unwrap_or(false), "items": items})
            }
            "image" => {
                let url = field("url").as_str().filter(|u| {
                    u.starts_with("https://") || u.starts_with("http://") || u.starts_with("/")
                });
                let Some(url) = url else {
                    self.warn("an image needs an http(s) or absolute-path url");
                    return None;
                };
                let alt = field("alt")
                    .as_str()
                    .map(|a| clip(a, 300))
                    .unwrap_or_default();
                json!({"type": "image", "url": url, "alt": alt})
            }
            "button" => {
                let label = self.text(field("label"), "button label")?;
                let action = self.action(field("action"))?;
                json!({
                    "type": "button",
                    "label": clip(&label, 80),
                    "variant": one_of("variant", &["primary", "secondary", "danger"], "secondary"),
                    "action": action,
                })
            }
            "divider" => json!({"type": "divider"}),
            other => {
                self.warn(&format!("unknown node type '{other}'"));
                self.nodes -= 1;
                return None;
            }
        };
        self.at = base;
        Some(built)
    }

    /// What a button does: send a message, open a link, or call a tool.
    fn action(&mut self, action: &Value) -> Option<Value> {
        let kind = action.get("type").and_then(Value::as_str);
        let built = match kind {
            Some("message") => action
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(|t| json!({"type": "message", "text": clip(t, MAX_TEXT)})),
            Some("link") => action
                .get("url")
                .and_then(Value::as_str)
                .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
                .map(|u| json!({"type": "link", "url": u})),
            Some("tool") => action
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(|n| {
                    json!({"type": "tool", "name": n, "args": action.get("args").filter(|a| a.is_object()).cloned().unwrap_or_else(|| json!({}))})
                }),
            _ => None,
        };
        if built.is_none() {
            self.warn("a button action is {type: message, text} | {type: link, url} | {type: tool, name, args}");
        }
        built
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_example_card_compiles_from_shortcuts() {
        let hint = json!({
            "status": "success", "title": "日程已创建", "badge": "SUCCESS",
            "body": "您的会议日程创建成功"
        });
        let compiled = compile(&[hint], "zh-CN");
        assert_eq!(compiled.warnings, Vec::<String>::new());
        assert_eq!(
            compiled.schema.unwrap(),
            json!({
                "version": "2.0", "locale": "zh-CN", "status": "success", "theme": "default",
                "root": {"type": "stack", "appearance": "card", "direction": "vertical", "gap": "sm", "children": [
                    {"type": "text", "content": "日程已创建", "role": "title"},
                    {"type": "badge", "label": "SUCCESS", "status": "success"},
                    {"type": "text", "content": "您的会议日程创建成功", "role": "body"}
                ]}
            })
        );
    }

    #[test]
    fn every_node_type_and_action_survives_when_valid() {
        let hint = json!({
            "title": "Team sync",
            "fields": {"When": "2026-03-17 09:00 America/Los_Angeles", "Length": 30},
            "blocks": [
                {"type": "divider"},
                {"type": "list", "ordered": true, "items": ["agenda", {"type": "text", "content": "notes", "role": "caption"}]},
                {"type": "image", "url": "https://example.com/a.png", "alt": "map"},
                {"type": "stack", "direction": "horizontal", "children": [{"type": "badge", "label": "new", "status": "pending"}]}
            ],
            "actions": [
                {"label": "Move it", "variant": "primary", "action": {"type": "message", "text": "move the sync to 10"}},
                {"label": "Open", "action": {"type": "link", "url": "https://cal.example.com/e/1"}},
                {"label": "Delete", "variant": "danger", "action": {"type": "tool", "name": "calendar_delete", "args": {"id": "e1"}}}
            ],
            "meta": {"toolId": "call-1", "other": "dropped"}
        });
        let compiled = compile(&[hint], "en");
        assert_eq!(compiled.warnings, Vec::<String>::new());
        let schema = compiled.schema.unwrap();
        let children = schema["root"]["children"].as_array().unwrap();
        let types: Vec<&str> = children
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "text", "kv", "divider", "list", "image", "stack", "button", "button", "button"
            ]
        );
        assert_eq!(
            children[1]["items"][1],
            json!({"label": "Length", "value": "30"})
        );
        assert_eq!(schema["meta"], json!({"toolId": "call-1"}));
        assert_eq!(schema["status"], "info");
    }

    #[test]
    fn invalid_parts_are_dropped_with_warnings_and_never_fail() {
        let hints = [
            json!("not an object"),
            json!({"blocks": [{"type": "marquee"}, {"type": "image", "url": "javascript:alert(1)"}, {"type": "text", "content": ""}]}),
            json!({"title": "kept", "status": "purple", "actions": [{"label": "x", "action": {"type": "eval"}}]}),
        ];
        let compiled = compile(&hints, "en");
        let schema = compiled.schema.unwrap();
        assert_eq!(
            schema["root"]["children"],
            json!([{"type": "text", "content": "kept", "role": "title"}])
        );
        assert_eq!(schema["status"], "info");
        assert!(compiled.warnings.len() >= 6, "{:?}", compiled.warnings);
        assert!(
            compiled
                .warnings
                .iter()
                .any(|w| w.contains("unknown node type 'marquee'"))
        );
        assert!(
            compiled
                .warnings
                .iter()
                .any(|w| w.starts_with("hints[1].blocks[1]"))
        );
        // Nothing valid at all: no schema, still no failure.
        let nothing = compile(&[json!({"blocks": "x"}), json!(null)], "en");
        assert_eq!(nothing.schema, None);
        assert_eq!(nothing.warnings.len(), 3);
        assert_eq!(compile(&[], "en").schema, None);
    }

    #[test]
    fn sizes_are_bounded() {
        let mut deep = json!({"type": "text", "content": "bottom"});
        for _ in 0..20 {
            deep = json!({"type": "stack", "children": [deep]});
        }
        let compiled = compile(&[json!({"blocks": [deep]})], "en");
        assert!(
            compiled
                .warnings
                .iter()
                .any(|w| w.contains("deeper than 8"))
        );
        let many: Vec<Value> = (0..500)
            .map(|i| json!({"type": "text", "content": format!("line {i}")}))
            .collect();
        let compiled = compile(&[json!({"blocks": many})], "en");
        let kept = compiled.schema.unwrap()["root"]["children"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(kept, MAX_NODES);
        let long = "x".repeat(MAX_TEXT + 10);
        let compiled = compile(&[json!({"body": long})], "en");
        let content = compiled.schema.unwrap()["root"]["children"][0]["content"]
            .as_str()
            .unwrap()
            .chars()
            .count();
        assert_eq!(content, MAX_TEXT);
    }

    #[test]
    fn several_hints_stack_their_cards_and_the_last_status_wins() {
        let compiled = compile(
            &[
                json!({"title": "Thinking about it", "status": "pending"}),
                json!({"title": "Created", "status": "success", "theme": "dark"}),
            ],
            "en",
        );
        let schema = compiled.schema.unwrap();
        assert_eq!(schema["status"], "success");
        assert_eq!(schema["theme"], "dark");
        assert_eq!(schema["root"]["type"], "stack");
        assert_eq!(schema["root"]["children"].as_array().unwrap().len(), 2);
        assert_eq!(schema["root"]["children"][1]["appearance"], "card");
    }
}
