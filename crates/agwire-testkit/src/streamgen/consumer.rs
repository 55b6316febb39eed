//! The consumer: its messages and state before the stream, and the
//! generator's approximate view of what it holds as the stream applies.

use rand::seq::IndexedRandom;
use serde_json::{Value, json};

use super::generator::Gen;
use super::message::Msg;
use super::patch::apply_patch;
use super::vocabulary::{ACTIVITY_TYPES, TOOL_NAMES};
use super::wire::{Owner, sget, tag_of, ty};

impl Gen {
    // ----- the consumer's starting point -----

    pub(super) fn initial_context(&mut self) {
        let n = *[0usize, 0, 1, 2, 3, 4].choose(&mut self.rng).unwrap_or(&0);
        for _ in 0..n {
            let owner = if self.p(0.1) {
                Some(self.attr_tag())
            } else {
                None
            };
            let role = self.pick_str(&[
                "user",
                "user",
                "assistant",
                "system",
                "developer",
                "activity",
                "reasoning",
            ]);
            let id = self.fresh("init");
            let mut m = Msg::new(&id, role, owner);
            match role {
                "assistant" => {
                    m.content = Value::String(self.text());
                    if self.p(0.5) {
                        let tc = self.fresh("init-call");
                        let name = self.pick_str(TOOL_NAMES).to_owned();
                        m.tool_calls.push((tc.clone(), name, "{\"q\":1}".into()));
                        self.tool_ids.push(tc.clone());
                        if self.p(0.6) {
                            let tid = self.fresh("init-tool");
                            let mut t = Msg::new(&tid, "tool", None);
                            t.content = Value::String("42".into());
                            t.tool_call_id = tc.clone();
                            self.answered.insert(tc);
                            self.msgs.push(m.clone());
                            self.initial_messages.push(m.to_json(&m.owner));
                            self.msgs.push(t.clone());
                            self.initial_messages.push(t.to_json(&None));
                            continue;
                        }
                    }
                }
                "activity" => {
                    m.activity_type = self.pick_str(ACTIVITY_TYPES).to_owned();
                    m.content = self.object();
                    self.activities.push(id.clone());
                }
                "user" if self.p(0.3) => {
                    m.content = self.parts();
                    self.feature("user_content_parts");
                }
                _ => m.content = Value::String(self.text()),
            }
            self.initial_messages.push(m.to_json(&m.owner));
            self.msgs.push(m);
        }
        self.initial_state = match self.range(0, 10) {
            0 => json!([1, 2, 3]),
            1 => json!(0),
            2 => json!("plain"),
            3 | 4 => json!({}),
            _ => self.object(),
        };
        self.state = self.initial_state.clone();
    }

    pub(super) fn parts(&mut self) -> Value {
        let n = self.range(1, 4);
        let mut parts = Vec::new();
        for _ in 0..n {
            let part = match self.range(0, 7) {
                0 | 1 => json!({"type": "text", "text": self.text()}),
                2 => {
                    json!({"type": "image", "source": {"type": "url", "value": "https://example.com/a.png", "mimeType": "image/png"}})
                }
                3 => {
                    json!({"type": "image", "source": {"type": "data", "value": "aGVsbG8=", "mimeType": "image/png"}, "id": "p1"})
                }
                4 => {
                    json!({"type": "document", "source": {"type": "file", "value": "file-abc", "provider": "openai"}, "metadata": {"filename": "a.pdf"}})
                }
                5 => {
                    json!({"type": "audio", "source": {"type": "url", "value": "https://example.com/a.mp3"}})
                }
                _ => {
                    json!({"type": "text", "text": self.text(), "id": "t1", "metadata": {"lang": "en"}})
                }
            };
            parts.push(part);
        }
        Value::Array(parts)
    }

    // ----- the consumer's view (approximate apply) -----

    fn find_msg(&mut self, id: &str) -> Option<&mut Msg> {
        self.msgs.iter_mut().find(|m| m.id == id)
    }

    pub(super) fn track(&mut self, e: &Value) {
        let id = sget(e, "messageId").unwrap_or("").to_owned();
        match ty(e) {
            "TEXT_MESSAGE_START" if !self.msgs.iter().any(|m| m.id == id) => {
                let mut m = Msg::new(&id, sget(e, "role").unwrap_or("assistant"), tag_of(e));
                m.name = sget(e, "name").map(str::to_owned);
                self.msgs.push(m);
            }
            "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" => {
                let delta = sget(e, "delta").unwrap_or("").to_owned();
                if let Some(m) = self.find_msg(&id)
                    && let Value::String(s) = &mut m.content
                {
                    s.push_str(&delta);
                }
            }
            "REASONING_MESSAGE_START" if !self.msgs.iter().any(|m| m.id == id) => {
                self.msgs.push(Msg::new(&id, "reasoning", tag_of(e)));
            }
            "TOOL_CALL_START" => {
                let tc = sget(e, "toolCallId").unwrap_or("").to_owned();
                let name = sget(e, "toolCallName").unwrap_or("").to_owned();
                if self
                    .msgs
                    .iter()
                    .any(|m| m.tool_calls.iter().any(|c| c.0 == tc))
                {
                    return;
                }
                let parent = sget(e, "parentMessageId")
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned);
                let pos = parent.as_ref().and_then(|p| {
                    self.msgs
                        .iter()
                        .position(|m| m.id == *p && m.role == "assistant")
                });
                let pos = match pos {
                    Some(pos) => pos,
                    None => {
                        let exists = parent
                            .as_ref()
                            .is_some_and(|p| self.msgs.iter().any(|m| m.id == *p));
                        let mid: &str = match (&parent, exists) {
                            (Some(p), false) => p,
                            _ => &tc,
                        };
                        self.msgs.push(Msg::new(mid, "assistant", tag_of(e)));
                        self.msgs.len() - 1
                    }
                };
                self.msgs[pos].tool_calls.push((tc, name, String::new()));
            }
            "TOOL_CALL_ARGS" => {
                let tc = sget(e, "toolCallId").unwrap_or("");
                let delta = sget(e, "delta").unwrap_or("");
                if let Some(c) = self
                    .msgs
                    .iter_mut()
                    .flat_map(|m| m.tool_calls.iter_mut())
                    .find(|c| c.0 == tc)
                {
                    c.2.push_str(delta);
                }
            }
            "TOOL_CALL_RESULT" => {
                let mut m = Msg::new(&id, "tool", tag_of(e));
                m.content = e.get("content").cloned().unwrap_or(Value::Null);
                m.tool_call_id = sget(e, "toolCallId").unwrap_or("").to_owned();
                self.msgs.push(m);
            }
            "ACTIVITY_SNAPSHOT" => {
                let replace = e.get("replace") != Some(&Value::Bool(false));
                let content = e.get("content").cloned().unwrap_or(json!({}));
                let activity_type = sget(e, "activityType").unwrap_or("").to_owned();
                match self.msgs.iter().position(|m| m.id == id) {
                    None => {
                        let mut m = Msg::new(&id, "activity", tag_of(e));
                        m.content = content;
                        m.activity_type = activity_type;
                        self.msgs.push(m);
                    }
                    Some(pos) if replace => {
                        let m = &mut self.msgs[pos];
                        m.role = "activity".into();
                        m.content = content;
                        m.activity_type = activity_type;
                    }
                    Some(_) => {}
                }
            }
            "ACTIVITY_DELTA" => {
                let patch = e
                    .get("patch")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if let Some(m) = self.find_msg(&id)
                    && m.role == "activity"
                    && let Some(c) = apply_patch(&m.content, &patch)
                {
                    m.content = c;
                }
            }
            "MESSAGES_SNAPSHOT" => {
                let snap: Vec<Msg> = e
                    .get("messages")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Msg::from_json).collect())
                    .unwrap_or_default();
                let has_activity = snap.iter().any(|m| m.role == "activity");
                let has_reasoning = snap.iter().any(|m| m.role == "reasoning");
                let mut next: Vec<Msg> = Vec::new();
                for m in &self.msgs {
                    if let Some(s) = snap.iter().find(|s| s.id == m.id) {
                        next.push(s.clone());
                    } else if (m.role == "activity" && !has_activity)
                        || (m.role == "reasoning" && !has_reasoning)
                    {
                        next.push(m.clone());
                    }
                }
                for s in snap {
                    if !next.iter().any(|m| m.id == s.id) {
                        next.push(s);
                    }
                }
                self.msgs = next;
            }
            "RUN_STARTED" => {
                if let Some(list) = e
                    .get("input")
                    .and_then(|i| i.get("messages"))
                    .and_then(Value::as_array)
                {
                    for v in list {
                        if let Some(m) = Msg::from_json(v)
                            && !self.msgs.iter().any(|x| x.id == m.id)
                        {
                            self.msgs.push(m);
                        }
                    }
                }
            }
            "STATE_SNAPSHOT" => self.state = e.get("snapshot").cloned().unwrap_or(Value::Null),
            "STATE_DELTA" => {
                let ops = e
                    .get("delta")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if let Some(s) = apply_patch(&self.state, &ops) {
                    self.state = s;
                }
            }
            _ => {}
        }
    }

    pub(super) fn owner_in_bucket(&self, m: &Msg) -> Option<Owner> {
        let bucket = match m.role.as_str() {
            "reasoning" => &self.m.own_reason,
            "activity" => &self.m.own_act,
            _ => &self.m.own_msg,
        };
        bucket.get(&m.id).cloned()
    }
}
