//! Openers and closers of text messages, tool calls, reasoning, steps and
//! subagents, tool results, and encrypted values of those entities.

use std::collections::BTreeSet;

use rand::seq::SliceRandom;
use serde_json::{Value, json};

use super::generator::Gen;
use super::schema::Kind;
use super::vocabulary::{SPEAKERS, STEP_NAMES, SUBAGENT_NAMES, TEXT_ROLES, TOOL_NAMES};
use super::wire::{E, Owner};

impl Gen {
    pub(super) fn open_text(&mut self, tag: &Owner) -> String {
        let id = self.fresh_or_empty("msg");
        let role = if self.p(0.4) {
            None
        } else {
            Some(self.pick_str(TEXT_ROLES))
        };
        let name = if self.p(0.1) {
            Some(self.pick_str(SPEAKERS))
        } else {
            None
        };
        if tag.is_some() {
            self.feature("attributed_text");
        }
        self.emit(
            E::new("TEXT_MESSAGE_START")
                .s("messageId", id.clone())
                .os("role", role)
                .os("name", name)
                .tag(tag)
                .done(),
        );
        self.text_ids.push(id.clone());
        id
    }

    pub(super) fn close_text(&mut self, id: &str) {
        let tag = self.cont_tag(self.m.own_msg.get(id).cloned());
        self.emit(
            E::new("TEXT_MESSAGE_END")
                .s("messageId", id)
                .tag(&tag)
                .done(),
        );
    }

    pub(super) fn plan_args(&mut self, id: &str) {
        let plan = match self.range(0, 10) {
            0 => "not json {".to_owned(),
            1 => String::new(),
            _ => json!({"query": self.text(), "limit": self.range(1, 50), "flags": ["a", "ü"]})
                .to_string(),
        };
        self.tool_plan.insert(id.to_owned(), (plan, 0));
    }

    pub(super) fn next_args(&mut self, id: &str) -> String {
        let take = self.range(1, 14);
        let Some((plan, pos)) = self.tool_plan.get_mut(id) else {
            return String::new();
        };
        let rest: String = plan[*pos..].chars().take(take).collect();
        *pos += rest.len();
        if rest.is_empty() {
            self.features.insert("empty_delta");
        }
        rest
    }

    pub(super) fn open_tool(
        &mut self,
        tag: &Owner,
        parent: Option<&str>,
        legacy_null_parent: bool,
    ) -> String {
        // Ids are unique per entity kind only: some producers give a tool call the
        // id of the assistant message that carries it.
        let id = match parent {
            Some(p) if !self.tool_ids.iter().any(|t| t == p) && self.p(0.08) => {
                self.feature("tool_call_shares_parent_message_id");
                p.to_owned()
            }
            _ => self.fresh("call"),
        };
        let name = self.pick_str(TOOL_NAMES);
        self.plan_args(&id);
        let mut e = E::new("TOOL_CALL_START")
            .s("toolCallId", id.clone())
            .s("toolCallName", name)
            .os("parentMessageId", parent);
        if legacy_null_parent {
            e = e.v("parentMessageId", Value::Null);
            self.feature("legacy_null_parent_message_id");
        }
        self.emit(e.tag(tag).done());
        self.tool_names.insert(id.clone(), name.to_owned());
        self.tool_ids.push(id.clone());
        self.run_tool_ids.push(id.clone());
        id
    }

    /// Chooses a parent message and a tag consistent with it.
    fn tool_parent(&mut self) -> (Option<String>, Owner, bool) {
        let r = self.range(0, 100);
        let mut null_parent = false;
        let parent = if r < 35 {
            None
        } else if r < 60 {
            let open = self.explicit(Kind::Text);
            let p = self.pick(&open);
            if p.is_some() {
                self.feature("tool_parent_open_text");
            }
            p
        } else if r < 75 {
            let ids: Vec<String> = self.msgs.iter().map(|m| m.id.clone()).collect();
            let p = self.pick(&ids);
            if p.is_some() {
                self.feature("tool_parent_existing_message");
            }
            p
        } else if r < 93 {
            self.feature("tool_parent_unknown");
            Some(self.fresh("parent"))
        } else {
            null_parent = true;
            None
        };
        let tag = match parent.as_ref().and_then(|p| self.m.own_msg.get(p).cloned()) {
            Some(Some(owner)) => {
                if self.p(0.5) {
                    Some(owner)
                } else {
                    self.feature("tool_inherits_parent_owner");
                    None
                }
            }
            Some(None) => None,
            None => self.pick_tag(),
        };
        (parent, tag, null_parent)
    }

    pub(super) fn act_tool_open(&mut self) {
        let (parent, tag, null_parent) = self.tool_parent();
        self.open_tool(&tag, parent.as_deref(), null_parent);
    }

    pub(super) fn close_tool(&mut self, id: &str) {
        if self.p(0.5) {
            let delta = self.next_args(id);
            if !delta.is_empty() {
                let tag = self.cont_tag(self.m.own_tool.get(id).cloned());
                self.emit(
                    E::new("TOOL_CALL_ARGS")
                        .s("toolCallId", id)
                        .s("delta", delta)
                        .tag(&tag)
                        .done(),
                );
            }
        }
        let tag = self.cont_tag(self.m.own_tool.get(id).cloned());
        self.emit(E::new("TOOL_CALL_END").s("toolCallId", id).tag(&tag).done());
    }

    pub(super) fn act_tool_result(&mut self) -> bool {
        let r = self.range(0, 100);
        let closed: Vec<String> = self
            .tool_ids
            .iter()
            .filter(|t| !self.m.tools.has(t) && !self.answered.contains(*t))
            .cloned()
            .collect();
        let call = if r < 70 {
            self.pick(&closed)
        } else if r < 80 {
            let open = self.m.tools.0.clone();
            let c = self.pick(&open);
            if c.is_some() {
                self.feature("tool_result_before_end");
            }
            c
        } else if r < 90 {
            self.feature("tool_result_unknown_call");
            Some(self.fresh("ghost-call"))
        } else {
            let answered: Vec<String> = self
                .answered
                .iter()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let c = self.pick(&answered);
            if c.is_some() {
                self.feature("tool_result_duplicate");
            }
            c
        };
        let Some(call) = call else { return false };
        let content = if self.p(0.65) {
            Value::String(if self.p(0.5) {
                json!({"ok": true, "value": self.text()}).to_string()
            } else {
                self.text()
            })
        } else {
            self.feature("tool_result_parts");
            self.parts()
        };
        let id = self.fresh("result");
        let role = if self.p(0.3) { Some("tool") } else { None };
        let tag = self.pick_tag();
        self.emit(
            E::new("TOOL_CALL_RESULT")
                .s("messageId", id)
                .s("toolCallId", call.clone())
                .v("content", content)
                .os("role", role)
                .tag(&tag)
                .done(),
        );
        self.answered.insert(call);
        true
    }

    pub(super) fn open_span(&mut self, tag: &Owner) -> String {
        let id = self.fresh("rs");
        self.emit(
            E::new("REASONING_START")
                .s("messageId", id.clone())
                .tag(tag)
                .done(),
        );
        self.span_ids.push(id.clone());
        id
    }

    pub(super) fn close_span(&mut self, id: &str) {
        let tag = self.cont_tag(self.m.own_reason.get(id).cloned());
        self.emit(E::new("REASONING_END").s("messageId", id).tag(&tag).done());
    }

    pub(super) fn open_reasoning(&mut self, tag: &Owner) -> String {
        let id = self.fresh("rm");
        self.open_reasoning_with(&id, tag);
        id
    }

    pub(super) fn open_reasoning_with(&mut self, id: &str, tag: &Owner) {
        self.emit(
            E::new("REASONING_MESSAGE_START")
                .s("messageId", id)
                .s("role", "reasoning")
                .tag(tag)
                .done(),
        );
        self.reasoning_ids.push(id.to_owned());
    }

    pub(super) fn close_reasoning(&mut self, id: &str) {
        let tag = self.cont_tag(self.m.own_reason.get(id).cloned());
        self.emit(
            E::new("REASONING_MESSAGE_END")
                .s("messageId", id)
                .tag(&tag)
                .done(),
        );
    }

    pub(super) fn start_step(&mut self, owner: &Owner) -> String {
        let free: Vec<&'static str> = STEP_NAMES
            .iter()
            .copied()
            .filter(|n| !self.m.step_active(owner, n))
            .collect();
        let name = match self.pick(&free) {
            Some(n) => n.to_owned(),
            None => self.fresh("step"),
        };
        if owner.is_some() {
            self.feature("attributed_step");
        }
        if self.m.active_steps().iter().any(|(_, n)| *n == name) {
            self.feature("same_step_name_under_two_owners");
        }
        self.emit(
            E::new("STEP_STARTED")
                .s("stepName", name.clone())
                .tag(owner)
                .done(),
        );
        name
    }

    pub(super) fn start_subagent(&mut self) -> String {
        let id = self.fresh_or_empty("sub");
        let mut e = E::new("SUBAGENT_STARTED")
            .s("subagentRunId", id.clone())
            .s("name", self.pick_str(SUBAGENT_NAMES));
        if self.p(0.3) {
            e = e.s("description", "delegated work");
        }
        let mut known: Vec<String> = self.m.subs.0.clone();
        known.extend(self.m.subs_closed.iter().cloned().collect::<BTreeSet<_>>());
        if !known.is_empty() && self.p(0.3) {
            let parent = self.pick(&known).unwrap_or_default();
            e = e.s("parentSubagentRunId", parent);
            self.feature("nested_subagent");
        }
        if !self.tool_ids.is_empty() && self.p(0.3) {
            let tools = self.tool_ids.clone();
            e = e.s("parentToolCallId", self.pick(&tools).unwrap_or_default());
        }
        if !self.msgs.is_empty() && self.p(0.2) {
            let ids: Vec<String> = self.msgs.iter().map(|m| m.id.clone()).collect();
            e = e.s("parentMessageId", self.pick(&ids).unwrap_or_default());
        }
        self.emit(e.done());
        self.feature("subagent");
        id
    }

    pub(super) fn finish_subagent(&mut self, id: &str, error: bool) {
        let e = if error {
            self.feature("subagent_error");
            let mut e = E::new("SUBAGENT_ERROR")
                .s("subagentRunId", id)
                .s("message", "subagent failed");
            if self.p(0.5) {
                e = e.s("code", "tool_failure");
            }
            e
        } else {
            let mut e = E::new("SUBAGENT_FINISHED").s("subagentRunId", id);
            match self.range(0, 10) {
                0..4 => {}
                4..6 => e = e.v("outcome", json!({"type": "success"})),
                6..8 => {
                    let ids: Vec<String> =
                        (0..self.range(0, 3)).map(|_| self.fresh("int")).collect();
                    e = e.v("outcome", json!({"type": "suspended", "interruptIds": ids}));
                    self.feature("subagent_suspended");
                }
                8 => e = e.v("outcome", json!({"type": "suspended"})),
                _ => {
                    e = e.v("outcome", json!({"type": "handed_off"}));
                    self.feature("unknown_subagent_outcome_stripped");
                }
            }
            if self.p(0.3) {
                e = e.v("result", self.json_value(1));
            } else if self.p(0.05) {
                e = e.v("result", Value::Null);
                self.feature("legacy_null_subagent_result");
            }
            e
        };
        self.emit(e.done());
    }

    /// Closes everything an explicit event opened (chunk lanes are left for
    /// RUN_FINISHED to close), so the run can finish.
    pub(super) fn close_all(&mut self) {
        let mut jobs: Vec<(u8, String)> = Vec::new();
        jobs.extend(self.explicit(Kind::Text).into_iter().map(|id| (0, id)));
        jobs.extend(self.explicit(Kind::Tool).into_iter().map(|id| (1, id)));
        jobs.extend(self.explicit(Kind::Reasoning).into_iter().map(|id| (2, id)));
        jobs.extend(self.m.spans.0.clone().into_iter().map(|id| (3, id)));
        jobs.shuffle(&mut self.rng);
        for (kind, id) in jobs {
            match kind {
                0 => {
                    if self.p(0.3) {
                        let tag = self.cont_tag(self.m.own_msg.get(&id).cloned());
                        let delta = self.text();
                        self.emit(
                            E::new("TEXT_MESSAGE_CONTENT")
                                .s("messageId", id.clone())
                                .s("delta", delta)
                                .tag(&tag)
                                .done(),
                        );
                    }
                    self.close_text(&id);
                }
                1 => self.close_tool(&id),
                2 => self.close_reasoning(&id),
                _ => self.close_span(&id),
            }
        }
        self.close_steps();
        let mut subs = self.m.subs.0.clone();
        subs.reverse();
        for id in subs {
            let error = self.p(0.15);
            self.finish_subagent(&id, error);
        }
        if !self.m.lanes.is_empty() {
            self.feature("chunk_closed_by_run_end");
        }
    }

    pub(super) fn close_steps(&mut self) {
        let mut steps = self.m.active_steps();
        steps.reverse();
        for (owner, name) in steps {
            self.emit(
                E::new("STEP_FINISHED")
                    .s("stepName", name)
                    .tag(&owner)
                    .done(),
            );
        }
    }

    pub(super) fn act_encrypted(&mut self) -> bool {
        let r = self.range(0, 100);
        let (subtype, entity, owner) = if r < 35 {
            let ids: Vec<String> = self
                .m
                .own_msg
                .keys()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let Some(id) = self.pick(&ids) else {
                return false;
            };
            let owner = self.m.own_msg.get(&id).cloned();
            ("message", id, owner)
        } else if r < 55 {
            let ids: Vec<String> = self
                .m
                .own_reason
                .keys()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let Some(id) = self.pick(&ids) else {
                return false;
            };
            let owner = self
                .m
                .own_msg
                .get(&id)
                .or_else(|| self.m.own_reason.get(&id))
                .cloned();
            self.feature("encrypted_reasoning_message");
            ("message", id, owner)
        } else if r < 80 {
            let ids: Vec<String> = self
                .m
                .own_tool
                .keys()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let Some(id) = self.pick(&ids) else {
                return false;
            };
            let owner = self.m.own_tool.get(&id).cloned();
            self.feature("encrypted_tool_call");
            ("tool-call", id, owner)
        } else {
            self.feature("encrypted_unknown_entity");
            let subtype = if self.p(0.5) { "message" } else { "tool-call" };
            (subtype, self.fresh("ghost"), None)
        };
        let tag = self.cont_tag(owner);
        self.emit(
            E::new("REASONING_ENCRYPTED_VALUE")
                .s("subtype", subtype)
                .s("entityId", entity)
                .s("encryptedValue", "gAAAAABl-opaque==")
                .tag(&tag)
                .done(),
        );
        self.feature("encrypted_value");
        true
    }
}
