//! The body of a run: a weighted random walk over valid acts.

use rand::Rng;
use serde_json::{Value, json};

use super::generator::Gen;
use super::schema::Kind;
use super::vocabulary::{CUSTOM_NAMES, TOOL_NAMES};
use super::wire::E;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    TextOpen,
    TextContent,
    TextEnd,
    TextReopen,
    ToolOpen,
    ToolArgs,
    ToolEnd,
    ToolReopen,
    ToolResult,
    SpanOpen,
    SpanEnd,
    ReasoningOpen,
    ReasoningContent,
    ReasoningEnd,
    Encrypted,
    StepStart,
    StepFinish,
    StateSnapshot,
    StateDelta,
    MessagesSnapshot,
    ActivitySnapshot,
    ActivityDelta,
    Raw,
    Custom,
    TextChunk,
    ToolChunk,
    ReasoningChunk,
    SubagentStart,
    SubagentFinish,
    SubagentError,
    Unknown,
}

const ACTS: &[(u32, Act)] = &[
    (8, Act::TextOpen),
    (14, Act::TextContent),
    (7, Act::TextEnd),
    (1, Act::TextReopen),
    (5, Act::ToolOpen),
    (8, Act::ToolArgs),
    (5, Act::ToolEnd),
    (1, Act::ToolReopen),
    (4, Act::ToolResult),
    (2, Act::SpanOpen),
    (2, Act::SpanEnd),
    (3, Act::ReasoningOpen),
    (5, Act::ReasoningContent),
    (3, Act::ReasoningEnd),
    (2, Act::Encrypted),
    (3, Act::StepStart),
    (3, Act::StepFinish),
    (2, Act::StateSnapshot),
    (4, Act::StateDelta),
    (2, Act::MessagesSnapshot),
    (2, Act::ActivitySnapshot),
    (2, Act::ActivityDelta),
    (2, Act::Raw),
    (2, Act::Custom),
    (8, Act::TextChunk),
    (5, Act::ToolChunk),
    (4, Act::ReasoningChunk),
    (3, Act::SubagentStart),
    (2, Act::SubagentFinish),
    (1, Act::SubagentError),
    (1, Act::Unknown),
];

impl Gen {
    pub(super) fn body(&mut self, n: usize) {
        let total: u32 = ACTS.iter().map(|(w, _)| w).sum();
        for _ in 0..n {
            for _attempt in 0..10 {
                let mut roll = self.rng.random_range(0..total);
                let mut chosen = Act::Custom;
                for (w, a) in ACTS {
                    if roll < *w {
                        chosen = *a;
                        break;
                    }
                    roll -= w;
                }
                if self.act(chosen) {
                    break;
                }
            }
        }
    }

    fn act(&mut self, a: Act) -> bool {
        match a {
            Act::TextOpen => {
                let tag = self.pick_tag();
                self.open_text(&tag);
            }
            Act::TextContent => {
                let ids = self.explicit(Kind::Text);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                let tag = self.cont_tag(self.m.own_msg.get(&id).cloned());
                let delta = self.text();
                self.emit(
                    E::new("TEXT_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", delta)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::TextEnd => {
                let ids = self.explicit(Kind::Text);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                self.close_text(&id);
            }
            Act::TextReopen => {
                let closed: Vec<String> = self
                    .text_ids
                    .iter()
                    .filter(|id| {
                        !self.m.text.has(id)
                            && self
                                .msgs
                                .iter()
                                .any(|m| m.id == **id && m.role != "activity")
                    })
                    .cloned()
                    .collect();
                let Some(id) = self.pick(&closed) else {
                    return false;
                };
                let tag = self.cont_tag(self.m.own_msg.get(&id).cloned());
                self.emit(
                    E::new("TEXT_MESSAGE_START")
                        .s("messageId", id)
                        .tag(&tag)
                        .done(),
                );
                self.feature("text_reopen");
            }
            Act::ToolOpen => self.act_tool_open(),
            Act::ToolArgs => {
                let ids = self.explicit(Kind::Tool);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                let delta = self.next_args(&id);
                let tag = self.cont_tag(self.m.own_tool.get(&id).cloned());
                self.emit(
                    E::new("TOOL_CALL_ARGS")
                        .s("toolCallId", id)
                        .s("delta", delta)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::ToolEnd => {
                let ids = self.explicit(Kind::Tool);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                self.close_tool(&id);
            }
            Act::ToolReopen => {
                let closed: Vec<String> = self
                    .tool_ids
                    .iter()
                    .filter(|id| !self.m.tools.has(id))
                    .cloned()
                    .collect();
                let Some(id) = self.pick(&closed) else {
                    return false;
                };
                let tag = self.cont_tag(self.m.own_tool.get(&id).cloned());
                let name = if self.p(0.7) {
                    self.tool_names
                        .get(&id)
                        .cloned()
                        .unwrap_or_else(|| "search".into())
                } else {
                    self.pick_str(TOOL_NAMES).to_owned()
                };
                self.plan_args(&id);
                self.emit(
                    E::new("TOOL_CALL_START")
                        .s("toolCallId", id)
                        .s("toolCallName", name)
                        .tag(&tag)
                        .done(),
                );
                self.feature("tool_reopen");
            }
            Act::ToolResult => return self.act_tool_result(),
            Act::SpanOpen => {
                let tag = self.pick_tag();
                self.open_span(&tag);
            }
            Act::SpanEnd => {
                let spans = self.m.spans.0.clone();
                let Some(id) = self.pick(&spans) else {
                    return false;
                };
                self.close_span(&id);
            }
            Act::ReasoningOpen => {
                let spans: Vec<String> = self
                    .m
                    .spans
                    .0
                    .iter()
                    .filter(|s| !self.m.rmsgs.has(s))
                    .cloned()
                    .collect();
                if !spans.is_empty() && self.p(0.5) {
                    let id = self.pick(&spans).unwrap_or_default();
                    let tag = self.cont_tag(self.m.own_reason.get(&id).cloned());
                    self.open_reasoning_with(&id, &tag);
                    self.feature("reasoning_message_shares_span_id");
                } else {
                    let tag = self.pick_tag();
                    self.open_reasoning(&tag);
                }
            }
            Act::ReasoningContent => {
                let ids = self.explicit(Kind::Reasoning);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                let tag = self.cont_tag(self.m.own_reason.get(&id).cloned());
                let delta = self.text();
                self.emit(
                    E::new("REASONING_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", delta)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::ReasoningEnd => {
                let ids = self.explicit(Kind::Reasoning);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                self.close_reasoning(&id);
            }
            Act::Encrypted => return self.act_encrypted(),
            Act::StepStart => {
                let owner = self.pick_tag();
                self.start_step(&owner);
            }
            Act::StepFinish => {
                let steps = self.m.active_steps();
                let Some((owner, name)) = self.pick(&steps) else {
                    return false;
                };
                self.emit(
                    E::new("STEP_FINISHED")
                        .s("stepName", name)
                        .tag(&owner)
                        .done(),
                );
            }
            Act::StateSnapshot => {
                let snapshot = match self.range(0, 8) {
                    0 => Value::Null,
                    1 => json!(0),
                    2 => json!([1, {"a": 2}]),
                    3 => json!("text state"),
                    _ => self.object(),
                };
                if !snapshot.is_object() {
                    self.feature("state_snapshot_non_object");
                }
                let tag = self.pick_tag();
                self.emit(
                    E::new("STATE_SNAPSHOT")
                        .v("snapshot", snapshot)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::StateDelta => {
                let state = self.state.clone();
                let applicable = self.p(0.75);
                let ops = self.patch_for(&state, applicable);
                if !applicable {
                    self.feature("state_delta_unappliable");
                }
                let tag = self.pick_tag();
                self.emit(
                    E::new("STATE_DELTA")
                        .v("delta", Value::Array(ops))
                        .tag(&tag)
                        .done(),
                );
            }
            Act::MessagesSnapshot => self.act_messages_snapshot(),
            Act::ActivitySnapshot => self.act_activity_snapshot(),
            Act::ActivityDelta => self.act_activity_delta(),
            Act::Raw => {
                let event = self.json_value(2);
                let source = if self.p(0.5) {
                    Some(self.pick_str(&["openai", "anthropic", "langgraph"]))
                } else {
                    None
                };
                let tag = self.pick_tag();
                self.emit(
                    E::new("RAW")
                        .v("event", event)
                        .os("source", source)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::Custom => {
                let name = self.pick_str(CUSTOM_NAMES);
                let value = self.json_value(2);
                let tag = self.pick_tag();
                self.emit(
                    E::new("CUSTOM")
                        .s("name", name)
                        .v("value", value)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::TextChunk => self.act_chunk(Kind::Text),
            Act::ToolChunk => self.act_chunk(Kind::Tool),
            Act::ReasoningChunk => self.act_chunk(Kind::Reasoning),
            Act::SubagentStart => {
                self.start_subagent();
            }
            Act::SubagentFinish => {
                let active = self.m.subs.0.clone();
                let Some(id) = self.pick(&active) else {
                    return false;
                };
                self.finish_subagent(&id, false);
            }
            Act::SubagentError => {
                let active = self.m.subs.0.clone();
                let Some(id) = self.pick(&active) else {
                    return false;
                };
                self.finish_subagent(&id, true);
            }
            Act::Unknown => {
                let ev = self.unknown_event();
                self.push(ev);
            }
        }
        true
    }
}
