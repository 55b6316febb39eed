//! Faults of text messages, tool calls and reasoning: starting one twice,
//! continuing one that is not open, and a tool call whose owner contradicts
//! its parent message's.

use std::collections::BTreeSet;

use super::faults::Fault;
use super::generator::Gen;
use super::schema::Kind;
use super::wire::E;

impl Gen {
    pub(super) fn duplicate_fault(&mut self, f: Fault, tpl: &'static str) {
        match f {
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
            _ => unreachable!("{f:?} is not a duplicate-start fault"),
        }
    }

    pub(super) fn unstarted_fault(&mut self, f: Fault, tpl: &'static str) {
        match f {
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
            _ => unreachable!("{f:?} is not an unstarted-entity fault"),
        }
    }

    pub(super) fn tool_parent_fault(&mut self, f: Fault, tpl: &'static str) {
        match f {
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
            _ => unreachable!("{f:?} is not a tool-parent fault"),
        }
    }
}
