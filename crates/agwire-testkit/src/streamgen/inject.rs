//! The faulty event of a broken stream, chosen by its fault.

use std::collections::BTreeSet;

use rand::seq::IndexedRandom;
use serde_json::Value;

use super::faults::Fault;
use super::generator::Gen;
use super::schema::Kind;
use super::vocabulary::{SPEAKERS, STEP_NAMES, TEXT_ROLES, TOOL_NAMES};
use super::wire::{E, Owner, ty};

impl Gen {
    pub(super) fn inject(&mut self, f: Fault) {
        let tpl = f.template();
        match f {
            Fault::FirstNotRunStarted => unreachable!("handled by broken_stream"),
            Fault::NestedRunStarted => {
                let run_id = if self.p(0.3) {
                    self.run_id.clone()
                } else {
                    self.fresh("run")
                };
                let ev = self.run_started_event(&run_id);
                self.commit(vec![ev], "nested_run_started", tpl);
            }
            Fault::AfterRunFinished => {
                self.close_all();
                self.run_finish();
                let mut evs = Vec::new();
                if self.p(0.2) {
                    evs.push(self.unknown_event());
                }
                evs.push(self.some_event());
                if ty(evs.last().expect("event")) == "RUN_FINISHED" {
                    self.commit(evs, "after_finished/run_finished", tpl);
                } else {
                    self.commit(evs, "after_finished/event", tpl);
                }
            }
            Fault::AfterRunError => {
                let label = if self.p(0.3) {
                    self.close_all();
                    self.run_finish();
                    "after_error/late_error"
                } else {
                    "after_error/mid_run"
                };
                let ev = self.run_error_event();
                self.emit(ev);
                let ev = if self.p(0.25) {
                    self.run_error_event()
                } else {
                    self.some_event()
                };
                self.commit(vec![ev], label, tpl);
            }
            Fault::FinishOpenSteps => {
                self.ensure_step();
                self.run_finished_fault("finish_open/steps", f);
            }
            Fault::FinishOpenText => {
                self.close_steps();
                self.ensure_explicit(Kind::Text);
                self.run_finished_fault("finish_open/text", f);
            }
            Fault::FinishOpenReasoningMessage => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                self.ensure_explicit(Kind::Reasoning);
                self.run_finished_fault("finish_open/reasoning_message", f);
            }
            Fault::FinishOpenReasoningSpan => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                for id in self.explicit(Kind::Reasoning) {
                    self.close_reasoning(&id);
                }
                self.ensure_span();
                self.run_finished_fault("finish_open/reasoning_span", f);
            }
            Fault::FinishOpenTool => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                for id in self.explicit(Kind::Reasoning) {
                    self.close_reasoning(&id);
                }
                for id in self.m.spans.0.clone() {
                    self.close_span(&id);
                }
                self.ensure_explicit(Kind::Tool);
                self.run_finished_fault("finish_open/tool", f);
            }
            Fault::FinishOpenSubagent => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                for id in self.explicit(Kind::Reasoning) {
                    self.close_reasoning(&id);
                }
                for id in self.m.spans.0.clone() {
                    self.close_span(&id);
                }
                for id in self.explicit(Kind::Tool) {
                    self.close_tool(&id);
                }
                self.ensure_subagent();
                self.run_finished_fault("finish_open/subagent", f);
            }
            Fault::DupTextStart => {
                let id = self.ensure_explicit(Kind::Text);
                let tag = self.pick_tag();
                if self.p(0.5) {
                    let ev = E::new("TEXT_MESSAGE_START")
                        .s("messageId", id)
                        .tag(&tag)
                        .done();
                    self.commit(vec![ev], "duplicate/text_start", tpl);
                } else {
                    let ev = E::new("TEXT_MESSAGE_CHUNK")
                        .s("messageId", id)
                        .s("delta", "again")
                        .tag(&tag)
                        .done();
                    self.commit(vec![ev], "duplicate/text_chunk", tpl);
                }
            }
            Fault::DupToolStart => {
                let id = self.ensure_explicit(Kind::Tool);
                let tag = self.pick_tag();
                let ty = if self.p(0.5) {
                    "TOOL_CALL_START"
                } else {
                    "TOOL_CALL_CHUNK"
                };
                let ev = E::new(ty)
                    .s("toolCallId", id)
                    .s("toolCallName", "search")
                    .tag(&tag)
                    .done();
                self.commit(
                    vec![ev],
                    if ty == "TOOL_CALL_START" {
                        "duplicate/tool_start"
                    } else {
                        "duplicate/tool_chunk"
                    },
                    tpl,
                );
            }
            Fault::DupReasoningSpan => {
                let id = self.ensure_span();
                let tag = self.pick_tag();
                let ev = E::new("REASONING_START")
                    .s("messageId", id)
                    .tag(&tag)
                    .done();
                self.commit(vec![ev], "duplicate/reasoning_span", tpl);
            }
            Fault::DupReasoningMessage => {
                let id = self.ensure_explicit(Kind::Reasoning);
                let tag = self.pick_tag();
                if self.p(0.5) {
                    let ev = E::new("REASONING_MESSAGE_START")
                        .s("messageId", id)
                        .s("role", "reasoning")
                        .tag(&tag)
                        .done();
                    self.commit(vec![ev], "duplicate/reasoning_start", tpl);
                } else {
                    let ev = E::new("REASONING_MESSAGE_CHUNK")
                        .s("messageId", id)
                        .s("delta", "again")
                        .tag(&tag)
                        .done();
                    self.commit(vec![ev], "duplicate/reasoning_chunk", tpl);
                }
            }
            Fault::TextContentNoStart | Fault::TextEndNoStart => {
                let (label, id, tag) = self.unstarted_target(Kind::Text);
                let ev = if f == Fault::TextContentNoStart {
                    E::new("TEXT_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", "orphan")
                } else {
                    E::new("TEXT_MESSAGE_END").s("messageId", id)
                };
                self.commit(vec![ev.tag(&tag).done()], label, tpl);
            }
            Fault::ToolArgsNoStart | Fault::ToolEndNoStart => {
                let (label, id, tag) = self.unstarted_target(Kind::Tool);
                let ev = if f == Fault::ToolArgsNoStart {
                    E::new("TOOL_CALL_ARGS").s("toolCallId", id).s("delta", "{")
                } else {
                    E::new("TOOL_CALL_END").s("toolCallId", id)
                };
                self.commit(vec![ev.tag(&tag).done()], label, tpl);
            }
            Fault::ReasoningContentNoStart | Fault::ReasoningMessageEndNoStart => {
                let (label, id, tag) = if self.p(0.2) {
                    let id = self.ensure_span();
                    if self.m.rmsgs.has(&id) {
                        self.unstarted_target(Kind::Reasoning)
                    } else {
                        let tag = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                        ("unstarted/span_id_is_not_a_message", id, tag)
                    }
                } else {
                    self.unstarted_target(Kind::Reasoning)
                };
                let ev = if f == Fault::ReasoningContentNoStart {
                    E::new("REASONING_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", "orphan")
                } else {
                    E::new("REASONING_MESSAGE_END").s("messageId", id)
                };
                self.commit(vec![ev.tag(&tag).done()], label, tpl);
            }
            Fault::ReasoningEndNoSpan => {
                let (label, id, tag) = match self.range(0, 3) {
                    0 => ("unstarted/unknown", self.fresh("nospan"), self.pick_tag()),
                    1 => {
                        let id = self.ensure_closed_span();
                        ("unstarted/closed", id, None)
                    }
                    _ => {
                        let id = self.ensure_explicit(Kind::Reasoning);
                        if self.m.spans.has(&id) {
                            ("unstarted/unknown", self.fresh("nospan"), None)
                        } else {
                            ("unstarted/message_id_is_not_a_span", id, None)
                        }
                    }
                };
                let ev = E::new("REASONING_END").s("messageId", id).tag(&tag).done();
                self.commit(vec![ev], label, tpl);
            }
            Fault::StepNotStarted => {
                let free: Vec<&'static str> = STEP_NAMES
                    .iter()
                    .copied()
                    .filter(|n| {
                        !self
                            .m
                            .steps
                            .iter()
                            .any(|(_, names)| names.iter().any(|x| x == n))
                    })
                    .collect();
                let name = match self.pick(&free) {
                    Some(n) if self.p(0.5) => n.to_owned(),
                    _ => self.fresh("never"),
                };
                let tag = self.pick_tag();
                let ev = E::new("STEP_FINISHED").s("stepName", name).tag(&tag).done();
                self.commit(vec![ev], "step/not_started", tpl);
            }
            Fault::StepOtherOwner => {
                let (owner, name) = self.ensure_step();
                let mut other: Owner = match &owner {
                    None => Some(self.other_tag(&None)),
                    Some(_) if self.p(0.5) => None,
                    Some(_) => Some(self.other_tag(&owner)),
                };
                while self.m.step_active(&other, &name) {
                    other = Some(self.fresh("other"));
                }
                let ev = E::new("STEP_FINISHED")
                    .s("stepName", name)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "step/other_owner", tpl);
            }
            Fault::StepDuplicate => {
                let (owner, name) = self.ensure_step();
                let ev = E::new("STEP_STARTED")
                    .s("stepName", name)
                    .tag(&owner)
                    .done();
                self.commit(vec![ev], "step/duplicate", tpl);
            }
            Fault::SubagentTerminalUnknown => {
                let closed: Vec<String> = self
                    .m
                    .subs_closed
                    .iter()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let (label, id) = match self.pick(&closed) {
                    Some(id) if self.p(0.5) => ("subagent/terminal_after_terminal", id),
                    _ => ("subagent/terminal_unknown", self.fresh("nosub")),
                };
                let ev = if self.p(0.5) {
                    E::new("SUBAGENT_FINISHED").s("subagentRunId", id).done()
                } else {
                    E::new("SUBAGENT_ERROR")
                        .s("subagentRunId", id)
                        .s("message", "x")
                        .done()
                };
                self.commit(vec![ev], label, tpl);
            }
            Fault::SubagentDuplicate => {
                let id = self.ensure_subagent();
                let ev = E::new("SUBAGENT_STARTED")
                    .s("subagentRunId", id)
                    .s("name", "again")
                    .done();
                self.commit(vec![ev], "subagent/duplicate", tpl);
            }
            Fault::SubagentReused => {
                let closed: Vec<String> = self
                    .m
                    .subs_closed
                    .iter()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let id = match self.pick(&closed) {
                    Some(id) => id,
                    None => {
                        let id = self.start_subagent();
                        let error = self.p(0.3);
                        self.finish_subagent(&id, error);
                        id
                    }
                };
                let ev = E::new("SUBAGENT_STARTED")
                    .s("subagentRunId", id)
                    .s("name", "again")
                    .done();
                self.commit(vec![ev], "subagent/reused", tpl);
            }
            Fault::SubagentParentUnknown => {
                let ev = E::new("SUBAGENT_STARTED")
                    .s("subagentRunId", self.fresh("sub"))
                    .s("name", "child")
                    .s("parentSubagentRunId", self.fresh("ghost-parent"))
                    .done();
                self.commit(vec![ev], "subagent/parent_unknown", tpl);
            }
            Fault::TagMismatchMessage => self.tag_mismatch_message(tpl),
            Fault::TagMismatchToolCall => self.tag_mismatch_tool(tpl),
            Fault::TagMismatchReasoning => self.tag_mismatch_reasoning(tpl),
            Fault::TagMismatchActivity => self.tag_mismatch_activity(tpl),
            Fault::ToolParentOwnerMismatch => {
                let parents: Vec<String> = self
                    .m
                    .own_msg
                    .keys()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let parent = match self.pick(&parents) {
                    Some(p) if self.p(0.6) => p,
                    _ => {
                        let tag = self.pick_tag();
                        self.open_text(&tag)
                    }
                };
                let owner = self.m.own_msg.get(&parent).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let chunk = self.p(0.4);
                let ev = E::new(if chunk {
                    "TOOL_CALL_CHUNK"
                } else {
                    "TOOL_CALL_START"
                })
                .s("toolCallId", self.fresh("call"))
                .s("toolCallName", "search")
                .s("parentMessageId", parent)
                .tag(&other)
                .done();
                self.commit(
                    vec![ev],
                    if chunk {
                        "tool_parent/chunk"
                    } else {
                        "tool_parent/start"
                    },
                    tpl,
                );
            }
            Fault::ToolReopenParentOwner => {
                let tool = self.ensure_closed(Kind::Tool);
                let tool_owner = self.m.own_tool.get(&tool).cloned().unwrap_or(None);
                let parents: Vec<String> = self
                    .m
                    .own_msg
                    .iter()
                    .filter(|(_, o)| **o != tool_owner)
                    .map(|(k, _)| k.clone())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let parent = match self.pick(&parents) {
                    Some(p) if self.p(0.5) => p,
                    _ => {
                        let tag = match &tool_owner {
                            None => Some(self.other_tag(&None)),
                            Some(_) => None,
                        };
                        self.open_text(&tag)
                    }
                };
                let chunk = self.p(0.4);
                let ev = E::new(if chunk {
                    "TOOL_CALL_CHUNK"
                } else {
                    "TOOL_CALL_START"
                })
                .s("toolCallId", tool)
                .s("toolCallName", "search")
                .s("parentMessageId", parent)
                .done();
                self.commit(
                    vec![ev],
                    if chunk {
                        "tool_reopen_parent/chunk"
                    } else {
                        "tool_reopen_parent/start"
                    },
                    tpl,
                );
            }
            Fault::ChunkTextNoId | Fault::ChunkToolNoId | Fault::ChunkReasoningNoId => {
                let kind = match f {
                    Fault::ChunkTextNoId => Kind::Text,
                    Fault::ChunkToolNoId => Kind::Tool,
                    _ => Kind::Reasoning,
                };
                let other_kind_lanes: Vec<Owner> = self
                    .m
                    .lanes
                    .iter()
                    .filter(|(o, p)| p.kind != kind && o.is_some())
                    .map(|(o, _)| o.clone())
                    .collect();
                let (label, tag) = match self.range(0, 3) {
                    0 => {
                        for (owner, _) in self.lanes_of(kind) {
                            self.emit(
                                E::new("CUSTOM")
                                    .s("name", "flush")
                                    .v("value", Value::Null)
                                    .tag(&owner)
                                    .done(),
                            );
                        }
                        ("chunk_first/untagged_nothing_open", None)
                    }
                    1 if !other_kind_lanes.is_empty() => (
                        "chunk_first/lane_holds_other_kind",
                        self.pick(&other_kind_lanes).unwrap_or(None),
                    ),
                    _ => {
                        let mut t = self.fresh("lane");
                        while self.m.lane(&Some(t.clone())).is_some() {
                            t = self.fresh("lane");
                        }
                        ("chunk_first/empty_lane", Some(t))
                    }
                };
                let mut e = E::new(kind.family().chunk).s("delta", "x").tag(&tag);
                if kind == Kind::Tool && self.p(0.5) {
                    e = e.s("toolCallName", "search");
                }
                self.commit(vec![e.done()], label, tpl);
            }
            Fault::ChunkToolNoName => {
                let tag = self.pick_tag();
                let ev = E::new("TOOL_CALL_CHUNK")
                    .s("toolCallId", self.fresh("call"))
                    .s("delta", "{")
                    .tag(&tag)
                    .done();
                self.commit(vec![ev], "chunk_first/tool_without_name", tpl);
            }
            Fault::ChunkConflictRole | Fault::ChunkConflictName => {
                let (owner, pending) = self.ensure_lane(Kind::Text);
                let mut e = self.continuation(Kind::Text, &owner, &pending);
                if f == Fault::ChunkConflictRole {
                    let roles: Vec<&'static str> = TEXT_ROLES
                        .iter()
                        .copied()
                        .filter(|r| *r != pending.role)
                        .collect();
                    e = e.s("role", self.pick(&roles).unwrap_or("user"));
                } else {
                    let names: Vec<&'static str> = SPEAKERS
                        .iter()
                        .copied()
                        .filter(|n| Some(*n) != pending.name.as_deref())
                        .collect();
                    e = e.s("name", self.pick(&names).unwrap_or("zed"));
                }
                let ev = e.s("delta", "x").done();
                self.commit(
                    vec![ev],
                    if f == Fault::ChunkConflictRole {
                        "chunk_conflict/role"
                    } else {
                        "chunk_conflict/name"
                    },
                    tpl,
                );
            }
            Fault::ChunkConflictToolName | Fault::ChunkConflictParent => {
                let (owner, pending) = self.ensure_lane(Kind::Tool);
                let mut e = self.continuation(Kind::Tool, &owner, &pending);
                if f == Fault::ChunkConflictToolName {
                    let names: Vec<&'static str> = TOOL_NAMES
                        .iter()
                        .copied()
                        .filter(|n| *n != pending.tool_name)
                        .collect();
                    e = e.s("toolCallName", self.pick(&names).unwrap_or("other"));
                } else {
                    e = e.s("parentMessageId", self.fresh("other-parent"));
                }
                let ev = e.s("delta", "1").done();
                self.commit(
                    vec![ev],
                    if f == Fault::ChunkConflictParent {
                        "chunk_conflict/parent"
                    } else {
                        "chunk_conflict/tool_name"
                    },
                    tpl,
                );
            }
            Fault::ChunkLaneOwner => {
                let kind = *[Kind::Text, Kind::Tool, Kind::Reasoning]
                    .choose(&mut self.rng)
                    .expect("kinds");
                let (owner, pending) = self.ensure_lane(kind);
                let other = Some(self.other_tag(&owner));
                let ev = E::new(kind.family().chunk)
                    .s(kind.family().id_field, pending.id)
                    .s("delta", "x")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "chunk_lane_owner", tpl);
            }
            Fault::ChunkAmbiguous => {
                let kind = *[Kind::Text, Kind::Tool, Kind::Reasoning]
                    .choose(&mut self.rng)
                    .expect("kinds");
                if self.m.lane(&None).is_some_and(|p| p.kind == kind) {
                    self.emit(
                        E::new("CUSTOM")
                            .s("name", "flush")
                            .v("value", Value::Null)
                            .done(),
                    );
                }
                let want = if self.p(0.3) { 3 } else { 2 };
                while self.lanes_of(kind).len() < want {
                    let holders: Vec<Owner> =
                        self.lanes_of(kind).into_iter().map(|(o, _)| o).collect();
                    let mut candidates: Vec<String> = self.m.subs.0.clone();
                    candidates.extend(self.attr_tags.iter().cloned());
                    candidates.retain(|c| !holders.contains(&Some(c.clone())));
                    let tag = match self.pick(&candidates) {
                        Some(t) if self.p(0.6) => t,
                        _ => self.fresh("lane"),
                    };
                    self.open_chunk(kind, Some(Some(tag)));
                }
                let ev = E::new(kind.family().chunk).s("delta", "who?").done();
                self.commit(vec![ev], "chunk_ambiguous", tpl);
            }
        }
    }
}
