//! Messages snapshots, activity snapshots and activity deltas.

use serde_json::{Value, json};

use super::generator::Gen;
use super::message::Msg;
use super::schema::Kind;
use super::vocabulary::ACTIVITY_TYPES;
use super::wire::E;

impl Gen {
    pub(super) fn act_messages_snapshot(&mut self) {
        let mut out = Vec::new();
        for m in self.msgs.clone() {
            if self.p(0.15) {
                self.feature("snapshot_drops_message");
                continue;
            }
            let mut owner = self.owner_in_bucket(&m).unwrap_or_else(|| m.owner.clone());
            if self.p(0.05) {
                owner = self.pick_tag();
                self.feature("snapshot_reattributes");
            }
            let mut m = m;
            if self.p(0.1)
                && let Value::String(s) = &mut m.content
            {
                s.push_str(" (edited)");
            }
            out.push(m.to_json(&owner));
        }
        for _ in 0..self.range(0, 3) {
            let id = self.fresh("snap");
            let role = self.pick_str(&["user", "assistant", "reasoning", "activity", "system"]);
            let mut m = Msg::new(&id, role, None);
            match role {
                "activity" => {
                    m.activity_type = self.pick_str(ACTIVITY_TYPES).to_owned();
                    m.content = self.object();
                    self.activities.push(id.clone());
                }
                "user" if self.p(0.3) => {
                    m.content = self.parts();
                }
                "assistant" if self.p(0.4) => {
                    let tc = self.fresh("snap-call");
                    m.tool_calls
                        .push((tc.clone(), "search".into(), "{}".into()));
                    self.tool_ids.push(tc);
                }
                _ => m.content = Value::String(self.text()),
            }
            let pos = self.range(0, out.len() + 1);
            let owner = if self.p(0.15) {
                Some(self.attr_tag())
            } else {
                None
            };
            out.insert(pos, m.to_json(&owner));
            self.feature("snapshot_adds_message");
        }
        if self.p(0.05) {
            let id = self.fresh("future");
            let pos = self.range(0, out.len() + 1);
            out.insert(
                pos,
                json!({"id": id, "role": "critic", "content": "an unknown role"}),
            );
            self.feature("snapshot_unknown_role_stripped");
        }
        if self.p(0.04) {
            let id = self.fresh("legacy");
            out.push(json!({"id": id, "role": "user", "content": [
                {"type": "text", "text": "see attached"},
                {"type": "binary", "mimeType": "image/png", "data": "aGVsbG8=", "filename": "a.png"}]}));
            self.feature("legacy_binary_part");
        }
        self.emit(
            E::new("MESSAGES_SNAPSHOT")
                .v("messages", Value::Array(out))
                .done(),
        );
        self.feature("messages_snapshot");
    }

    pub(super) fn act_activity_snapshot(&mut self) {
        let r = self.range(0, 100);
        let existing = self.activities.clone();
        let id = if r < 55 || existing.is_empty() {
            let id = self.fresh("act");
            self.activities.push(id.clone());
            id
        } else if r < 95 {
            self.pick(&existing).unwrap_or_default()
        } else {
            // An activity that replaces a finished text message.
            let closed: Vec<String> = self
                .text_ids
                .iter()
                .filter(|id| !self.m.text.has(id) && !self.m.lane_held(Kind::Text, id))
                .cloned()
                .collect();
            let Some(id) = self.pick(&closed) else { return };
            self.feature("activity_replaces_message");
            self.activities.push(id.clone());
            id
        };
        let replace = match self.range(0, 4) {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        if replace == Some(false) {
            self.feature("activity_replace_false");
        }
        let content = self.object();
        let tag = self.pick_tag();
        let activity_type = self.pick_str(ACTIVITY_TYPES);
        self.emit(
            E::new("ACTIVITY_SNAPSHOT")
                .s("messageId", id)
                .s("activityType", activity_type)
                .v("content", content)
                .ov("replace", replace.map(Value::Bool))
                .tag(&tag)
                .done(),
        );
        self.feature("activity");
    }

    pub(super) fn act_activity_delta(&mut self) {
        let existing = self.activities.clone();
        let (id, owner) = match self.pick(&existing) {
            Some(id) if self.p(0.85) => {
                let owner = self.m.own_act.get(&id).cloned();
                (id, owner)
            }
            _ => {
                self.feature("activity_delta_unknown_id");
                (self.fresh("act-missing"), None)
            }
        };
        let content = self
            .msgs
            .iter()
            .find(|m| m.id == id)
            .map_or(json!({}), |m| m.content.clone());
        let applicable = self.p(0.8);
        let patch = self.patch_for(&content, applicable);
        let tag = self.cont_tag(owner);
        let activity_type = self.pick_str(ACTIVITY_TYPES);
        self.emit(
            E::new("ACTIVITY_DELTA")
                .s("messageId", id)
                .s("activityType", activity_type)
                .v("patch", Value::Array(patch))
                .tag(&tag)
                .done(),
        );
    }
}
