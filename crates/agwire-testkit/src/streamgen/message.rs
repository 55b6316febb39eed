//! A message as the generator tracks the consumer's list of them (its own
//! module: the generator holds them, the consumer's steps make them).

use serde_json::{Map, Value, json};

use super::schema::KNOWN_ROLES;
use super::wire::{E, Owner, sget, tag_of};

/// A message as the generator approximately tracks the consumer's list.
#[derive(Debug, Clone)]
pub(super) struct Msg {
    pub(super) id: String,
    pub(super) role: String,
    pub(super) owner: Owner,
    pub(super) name: Option<String>,
    pub(super) content: Value,
    /// (id, name, arguments)
    pub(super) tool_calls: Vec<(String, String, String)>,
    pub(super) tool_call_id: String,
    pub(super) activity_type: String,
}

impl Msg {
    pub(super) fn new(id: &str, role: &str, owner: Owner) -> Self {
        Msg {
            id: id.to_owned(),
            role: role.to_owned(),
            owner,
            name: None,
            content: Value::String(String::new()),
            tool_calls: Vec::new(),
            tool_call_id: String::new(),
            activity_type: String::new(),
        }
    }

    pub(super) fn from_json(v: &Value) -> Option<Msg> {
        let id = sget(v, "id")?;
        let role = sget(v, "role")?;
        if !KNOWN_ROLES.contains(&role) {
            return None;
        }
        let mut m = Msg::new(id, role, tag_of(v));
        m.name = sget(v, "name").map(str::to_owned);
        m.content = v
            .get("content")
            .cloned()
            .unwrap_or(Value::String(String::new()));
        m.tool_call_id = sget(v, "toolCallId").unwrap_or("").to_owned();
        m.activity_type = sget(v, "activityType").unwrap_or("").to_owned();
        if let Some(calls) = v.get("toolCalls").and_then(Value::as_array) {
            for c in calls {
                let f = c.get("function");
                m.tool_calls.push((
                    sget(c, "id").unwrap_or("").to_owned(),
                    f.and_then(|f| sget(f, "name")).unwrap_or("").to_owned(),
                    f.and_then(|f| sget(f, "arguments"))
                        .unwrap_or("")
                        .to_owned(),
                ));
            }
        }
        Some(m)
    }

    pub(super) fn to_json(&self, owner: &Owner) -> Value {
        let text = || match &self.content {
            Value::String(s) => Value::String(s.clone()),
            _ => Value::String(String::new()),
        };
        let e = Map::new();
        let mut e = E(e).s("id", self.id.clone()).s("role", self.role.clone());
        e = match self.role.as_str() {
            "developer" | "system" => e.v("content", text()).os("name", self.name.as_deref()),
            "user" => e
                .v("content", self.content.clone())
                .os("name", self.name.as_deref()),
            "assistant" => {
                let mut e = e.os("name", self.name.as_deref());
                if self.content.as_str().is_some_and(|s| !s.is_empty()) {
                    e = e.v("content", text());
                }
                if !self.tool_calls.is_empty() {
                    let calls: Vec<Value> = self
                        .tool_calls
                        .iter()
                        .map(|(id, name, args)| {
                            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
                        })
                        .collect();
                    e = e.v("toolCalls", Value::Array(calls));
                }
                e
            }
            "tool" => e
                .v("content", self.content.clone())
                .s("toolCallId", self.tool_call_id.clone()),
            "activity" => {
                let content = if self.content.is_object() {
                    self.content.clone()
                } else {
                    json!({})
                };
                e.s("activityType", self.activity_type.clone())
                    .v("content", content)
            }
            _ => e.v("content", text()),
        };
        e.tag(owner).done()
    }
}
