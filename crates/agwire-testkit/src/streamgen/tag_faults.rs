//! Faults of attribution: an event whose `subagentRunId` contradicts the
//! recorded owner of the message, tool call, reasoning or activity it names.

use serde_json::{Value, json};

use super::generator::Gen;
use super::schema::Kind;
use super::wire::{E, Owner};

impl Gen {
    pub(super) fn tag_mismatch_message(&mut self, tpl: &'static str) {
        match self.range(0, 8) {
            0 => {
                let id = self.ensure_explicit(Kind::Text);
                let owner = self.m.own_msg.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = if self.p(0.6) {
                    E::new("TEXT_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", "x")
                } else {
                    E::new("TEXT_MESSAGE_END").s("messageId", id)
                };
                self.commit(vec![ev.tag(&other).done()], "tag/text_continuation", tpl);
            }
            1 | 2 => {
                let id = self.ensure_closed(Kind::Text);
                let owner = self.m.own_msg.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                if self.p(0.5) {
                    let ev = E::new("TEXT_MESSAGE_START")
                        .s("messageId", id)
                        .tag(&other)
                        .done();
                    self.commit(vec![ev], "tag/text_reopen", tpl);
                } else {
                    let ev = E::new("TEXT_MESSAGE_CHUNK")
                        .s("messageId", id)
                        .s("delta", "x")
                        .tag(&other)
                        .done();
                    self.commit(vec![ev], "tag/text_reopen_by_chunk", tpl);
                }
            }
            3 => {
                let id = self.ensure_closed(Kind::Text);
                let owner = self.m.own_msg.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_ENCRYPTED_VALUE")
                    .s("subtype", "message")
                    .s("entityId", id)
                    .s("encryptedValue", "enc")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/encrypted_text_message", tpl);
            }
            4 => {
                let id = self.ensure_closed(Kind::Reasoning);
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_ENCRYPTED_VALUE")
                    .s("subtype", "message")
                    .s("entityId", id)
                    .s("encryptedValue", "enc")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/encrypted_reasoning_message", tpl);
            }
            5 => {
                let id = self.fresh("result");
                let tag = self.pick_tag();
                let calls = self.tool_ids.clone();
                let call = self.pick(&calls).unwrap_or_else(|| "call-x".into());
                self.emit(
                    E::new("TOOL_CALL_RESULT")
                        .s("messageId", id.clone())
                        .s("toolCallId", call)
                        .s("content", "ok")
                        .tag(&tag)
                        .done(),
                );
                let other = Some(self.other_tag(&tag));
                let ev = E::new("TEXT_MESSAGE_START")
                    .s("messageId", id)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/tool_result_minted_owner", tpl);
            }
            6 => {
                let owner = Some(self.other_tag(&None));
                let id = self.open_text(&owner);
                let new_owner = if self.p(0.5) {
                    None
                } else {
                    Some(self.other_tag(&owner))
                };
                let snap = self.snapshot_overriding(&[(id.clone(), new_owner)], Vec::new());
                self.emit(snap);
                let ev = E::new("TEXT_MESSAGE_CONTENT")
                    .s("messageId", id)
                    .s("delta", "x")
                    .tag(&owner)
                    .done();
                self.commit(vec![ev], "tag/snapshot_reattributed_open_message", tpl);
            }
            _ => {
                self.close_all();
                self.run_finish();
                self.run_no += 1;
                let run_id = self.fresh("run");
                let id = self.fresh("echo");
                let seeded = Some(self.attr_tag());
                let msg = json!({"id": id, "role": "assistant", "content": "earlier", "subagentRunId": seeded});
                let input = json!({"threadId": self.thread_id, "runId": run_id, "messages": [msg]});
                self.emit(
                    E::new("RUN_STARTED")
                        .s("threadId", self.thread_id.clone())
                        .s("runId", run_id.clone())
                        .v("input", input)
                        .done(),
                );
                self.run_id = run_id;
                let other = Some(self.other_tag(&seeded));
                let ev = E::new("TEXT_MESSAGE_START")
                    .s("messageId", id)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/input_echo_seeded_owner", tpl);
            }
        }
    }

    pub(super) fn tag_mismatch_tool(&mut self, tpl: &'static str) {
        match self.range(0, 5) {
            0 => {
                let id = self.ensure_explicit(Kind::Tool);
                let owner = self.m.own_tool.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = if self.p(0.6) {
                    E::new("TOOL_CALL_ARGS").s("toolCallId", id).s("delta", "{")
                } else {
                    E::new("TOOL_CALL_END").s("toolCallId", id)
                };
                self.commit(vec![ev.tag(&other).done()], "tag/tool_continuation", tpl);
            }
            1 => {
                let id = self.ensure_closed(Kind::Tool);
                let owner = self.m.own_tool.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ty = if self.p(0.5) {
                    "TOOL_CALL_START"
                } else {
                    "TOOL_CALL_CHUNK"
                };
                let ev = E::new(ty)
                    .s("toolCallId", id)
                    .s("toolCallName", "search")
                    .tag(&other)
                    .done();
                self.commit(
                    vec![ev],
                    if ty == "TOOL_CALL_START" {
                        "tag/tool_reopen"
                    } else {
                        "tag/tool_reopen_by_chunk"
                    },
                    tpl,
                );
            }
            2 => {
                let id = self.ensure_closed(Kind::Tool);
                let owner = self.m.own_tool.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_ENCRYPTED_VALUE")
                    .s("subtype", "tool-call")
                    .s("entityId", id)
                    .s("encryptedValue", "enc")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/encrypted_tool_call", tpl);
            }
            _ => {
                let owner = Some(self.other_tag(&None));
                let id = self.open_tool(&owner, None, false);
                let new_owner = if self.p(0.5) {
                    None
                } else {
                    Some(self.other_tag(&owner))
                };
                let holder = self.fresh("holder");
                let extra = json!({"id": holder, "role": "assistant",
                    "toolCalls": [{"id": id, "type": "function", "function": {"name": "search", "arguments": ""}}]});
                let mut extra = extra;
                if let Some(o) = &new_owner {
                    extra["subagentRunId"] = json!(o);
                }
                let snap = self.snapshot_overriding(&[], vec![extra]);
                self.emit(snap);
                let ev = E::new("TOOL_CALL_ARGS")
                    .s("toolCallId", id)
                    .s("delta", "{")
                    .tag(&owner)
                    .done();
                self.commit(vec![ev], "tag/snapshot_reattributed_tool_call", tpl);
            }
        }
    }

    pub(super) fn tag_mismatch_reasoning(&mut self, tpl: &'static str) {
        match self.range(0, 5) {
            0 => {
                let id = self.ensure_explicit(Kind::Reasoning);
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = if self.p(0.6) {
                    E::new("REASONING_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", "x")
                } else {
                    E::new("REASONING_MESSAGE_END").s("messageId", id)
                };
                self.commit(
                    vec![ev.tag(&other).done()],
                    "tag/reasoning_continuation",
                    tpl,
                );
            }
            1 => {
                let id = self.ensure_span();
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_END")
                    .s("messageId", id)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/span_end", tpl);
            }
            2 => {
                let spans: Vec<String> = self
                    .m
                    .spans
                    .0
                    .iter()
                    .filter(|s| !self.m.rmsgs.has(s))
                    .cloned()
                    .collect();
                let id = match self.pick(&spans) {
                    Some(s) => s,
                    None => {
                        let tag = self.pick_tag();
                        self.open_span(&tag)
                    }
                };
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_MESSAGE_START")
                    .s("messageId", id)
                    .s("role", "reasoning")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/message_inside_foreign_span", tpl);
            }
            3 => {
                let id = self.ensure_closed(Kind::Reasoning);
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                if self.p(0.5) {
                    let ev = E::new("REASONING_MESSAGE_START")
                        .s("messageId", id)
                        .s("role", "reasoning")
                        .tag(&other)
                        .done();
                    self.commit(vec![ev], "tag/reasoning_reopen", tpl);
                } else {
                    let ev = E::new("REASONING_MESSAGE_CHUNK")
                        .s("messageId", id)
                        .s("delta", "x")
                        .tag(&other)
                        .done();
                    self.commit(vec![ev], "tag/reasoning_reopen_by_chunk", tpl);
                }
            }
            _ => {
                let id = self.ensure_closed_span();
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_START")
                    .s("messageId", id)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/span_reopen", tpl);
            }
        }
    }

    pub(super) fn tag_mismatch_activity(&mut self, tpl: &'static str) {
        let delta = |id: String, tag: &Owner| {
            E::new("ACTIVITY_DELTA")
                .s("messageId", id)
                .s("activityType", "PLAN")
                .v("patch", json!([{"op": "add", "path": "/x", "value": 1}]))
                .tag(tag)
                .done()
        };
        match self.range(0, 3) {
            0 => {
                let (id, owner) = self.ensure_activity();
                let other = Some(self.other_tag(&owner));
                self.commit(vec![delta(id, &other)], "tag/activity_delta", tpl);
            }
            1 => {
                let (id, owner) = self.ensure_activity();
                let other = Some(self.other_tag(&owner));
                self.emit(
                    E::new("ACTIVITY_SNAPSHOT")
                        .s("messageId", id.clone())
                        .s("activityType", "PLAN")
                        .v("content", json!({"kept": true}))
                        .v("replace", Value::Bool(false))
                        .tag(&other)
                        .done(),
                );
                self.commit(
                    vec![delta(id, &other)],
                    "tag/activity_replace_false_keeps_owner",
                    tpl,
                );
            }
            _ => {
                let id = self.fresh("act");
                self.activities.push(id.clone());
                let seeded = if self.p(0.5) {
                    None
                } else {
                    Some(self.attr_tag())
                };
                let mut extra = json!({"id": id, "role": "activity", "activityType": "PLAN", "content": {"n": 1}});
                if let Some(s) = &seeded {
                    extra["subagentRunId"] = json!(s);
                }
                let snap = self.snapshot_overriding(&[], vec![extra]);
                self.emit(snap);
                let other = Some(self.other_tag(&seeded));
                self.commit(
                    vec![delta(id, &other)],
                    "tag/activity_seeded_by_snapshot",
                    tpl,
                );
            }
        }
    }
}
