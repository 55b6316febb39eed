//! Reading and building wire events.

use serde_json::{Map, Value};

pub(super) type Owner = Option<String>;

pub(super) fn ty(e: &Value) -> &str {
    e.get("type").and_then(Value::as_str).unwrap_or("")
}

pub(super) fn sget<'a>(e: &'a Value, key: &str) -> Option<&'a str> {
    e.get(key).and_then(Value::as_str)
}

pub(super) fn tag_of(e: &Value) -> Owner {
    sget(e, "subagentRunId").map(str::to_owned)
}

pub(super) fn who(owner: &Owner) -> &str {
    owner.as_deref().unwrap_or("(the parent agent)")
}

/// A tiny event builder.
pub(super) struct E(pub(super) Map<String, Value>);

impl E {
    pub(super) fn new(event_type: &str) -> Self {
        let mut m = Map::new();
        m.insert("type".into(), Value::String(event_type.to_owned()));
        E(m)
    }
    pub(super) fn s(mut self, key: &str, value: impl Into<String>) -> Self {
        self.0.insert(key.to_owned(), Value::String(value.into()));
        self
    }
    pub(super) fn v(mut self, key: &str, value: Value) -> Self {
        self.0.insert(key.to_owned(), value);
        self
    }
    pub(super) fn os(mut self, key: &str, value: Option<&str>) -> Self {
        if let Some(value) = value {
            self.0
                .insert(key.to_owned(), Value::String(value.to_owned()));
        }
        self
    }
    pub(super) fn tag(self, tag: &Owner) -> Self {
        self.os("subagentRunId", tag.as_deref())
    }
    pub(super) fn ov(mut self, key: &str, value: Option<Value>) -> Self {
        if let Some(value) = value {
            self.0.insert(key.to_owned(), value);
        }
        self
    }
    pub(super) fn done(self) -> Value {
        Value::Object(self.0)
    }
}
