//! Valid chunk events: opening a chunk lane, and continuing one.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::generator::Gen;
use super::mirror::Pending;
use super::schema::Kind;
use super::vocabulary::{SPEAKERS, TEXT_ROLES, TOOL_NAMES};
use super::wire::{E, Owner};

impl Gen {
    pub(super) fn act_chunk(&mut self, kind: Kind) {
        let open = self.lanes_of(kind);
        if !open.is_empty() && self.p(0.6) {
            let (owner, pending) = self.pick(&open).expect("non-empty");
            self.continue_chunk(kind, &owner, &pending);
        } else {
            self.open_chunk(kind, None);
        }
        self.feature(match kind {
            Kind::Text => "text_chunk",
            Kind::Tool => "tool_chunk",
            Kind::Reasoning => "reasoning_chunk",
        });
    }

    /// Opens a new chunk stream; returns (lane owner, id).
    pub(super) fn open_chunk(&mut self, kind: Kind, tag: Option<Owner>) -> (Owner, String) {
        let tag = match tag {
            Some(t) => t,
            None => self.pick_tag(),
        };
        if tag.is_some() {
            self.feature("chunk_lane_subagent");
        }
        if self.m.lane(&tag).is_some() {
            self.feature("chunk_closes_previous_in_lane");
        }
        let mut e = E::new(kind.family().chunk);
        let id;
        match kind {
            Kind::Text => {
                id = self.fresh_or_empty("cmsg");
                self.text_ids.push(id.clone());
                e = e.s("messageId", id.clone());
                if self.p(0.5) {
                    e = e.s("role", self.pick_str(TEXT_ROLES));
                }
                if self.p(0.15) {
                    e = e.s("name", self.pick_str(SPEAKERS));
                }
                if self.p(0.85) {
                    e = e.s("delta", self.text());
                }
            }
            Kind::Tool => {
                id = self.fresh("ccall");
                let name = self.pick_str(TOOL_NAMES);
                self.plan_args(&id);
                self.tool_names.insert(id.clone(), name.to_owned());
                self.tool_ids.push(id.clone());
                self.run_tool_ids.push(id.clone());
                e = e.s("toolCallId", id.clone()).s("toolCallName", name);
                let r = self.range(0, 10);
                if r < 3 {
                    // A parent owned consistently with this lane, or unknown to the verifier.
                    let candidates: Vec<String> = self
                        .m
                        .own_msg
                        .iter()
                        .filter(|(_, o)| **o == tag)
                        .map(|(k, _)| k.clone())
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    if let Some(p) = self.pick(&candidates) {
                        e = e.s("parentMessageId", p);
                    }
                } else if r < 5 {
                    e = e.s("parentMessageId", self.fresh("cparent"));
                } else if r == 5 {
                    e = e.v("parentMessageId", Value::Null);
                    self.feature("legacy_null_parent_message_id");
                }
                if self.p(0.7) {
                    let d = self.next_args(&id);
                    e = e.s("delta", d);
                }
            }
            Kind::Reasoning => {
                id = self.fresh("crm");
                self.reasoning_ids.push(id.clone());
                e = e.s("messageId", id.clone());
                if self.p(0.8) {
                    e = e.s("delta", self.text());
                }
            }
        }
        self.emit(e.tag(&tag).done());
        (tag, id)
    }

    fn continue_chunk(&mut self, kind: Kind, owner: &Owner, pending: &Pending) {
        let mut e = E::new(kind.family().chunk);
        let with_id = self.p(0.35);
        let with_tag = owner.is_some() && self.p(0.5);
        let resolves_bare = self.m.resolve_lane(kind, None, &None).ok().as_ref() == Some(owner);
        if with_id || (!with_tag && !resolves_bare) {
            e = e.s(kind.family().id_field, pending.id.clone());
            if !with_tag && owner.is_some() {
                self.feature("chunk_untagged_continuation_of_subagent_lane_by_id");
            }
        } else if !with_tag {
            self.feature(if owner.is_some() {
                "chunk_bare_continuation_of_sole_subagent_lane"
            } else {
                "chunk_bare_continuation"
            });
        }
        if with_tag {
            e = e.tag(owner);
        }
        match kind {
            Kind::Text => {
                if self.p(0.1) {
                    e = e.s("role", pending.role.clone());
                    self.feature("chunk_repeats_opener_field");
                }
                if let Some(n) = &pending.name
                    && self.p(0.2)
                {
                    e = e.s("name", n.clone());
                }
                if self.p(0.85) {
                    e = e.s("delta", self.text());
                } else {
                    self.feature("chunk_without_delta");
                }
            }
            Kind::Tool => {
                if self.p(0.1) {
                    e = e.s("toolCallName", pending.tool_name.clone());
                    self.feature("chunk_repeats_opener_field");
                }
                match &pending.parent {
                    Some(p) if self.p(0.2) => e = e.s("parentMessageId", p.clone()),
                    None if self.p(0.05) => {
                        e = e.v("parentMessageId", Value::Null);
                        self.feature("legacy_null_parent_message_id");
                    }
                    _ => {}
                }
                if self.p(0.85) {
                    let d = self.next_args(&pending.id);
                    e = e.s("delta", d);
                } else {
                    self.feature("chunk_without_delta");
                }
            }
            Kind::Reasoning => {
                if self.p(0.85) {
                    e = e.s("delta", self.text());
                } else {
                    self.feature("chunk_without_delta");
                }
            }
        }
        let mut ev = e.done();
        if ev.get("delta").is_none() && self.p(0.5) {
            // A final chunk carrying only metadata (usage, a finish reason).
            ev["metadata"] = json!({"finishReason": "stop"});
            self.feature("chunk_metadata_only_continuation");
        }
        self.emit(ev);
    }
}
