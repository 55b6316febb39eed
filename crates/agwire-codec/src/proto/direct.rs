//! `agwire_core::Event` → protobuf bytes, written straight from our types.
//!
//! The official mapping (flattened outcomes, array content as
//! `content_parts`, activity content as `activity_content`, patch ops as an
//! enum, usage as a repeated field), without building prost's tree: nothing
//! is copied, and nested lengths are measured once ([`super::writer`]).
//! Fields are written in field-number order, as prost writes them, so the
//! bytes are prost's; `tests/proto_direct.rs` holds them to the test kit's
//! independent mapping through prost (`agwire_testkit::proto_oracle`), and
//! `tests/proto_interop.rs` to the official SDKs' encoders.

use agwire_core::{
    BaseEvent, Content, ContentPart, EncryptedValueSubtype, Event, Interrupt, MediaPart, Message,
    PartSource, PatchOp, PatchOperation, ResumeEntry, ResumeStatus, RunAgentInput,
    RunFinishedOutcome, SubagentFinishedOutcome, TokenUsage, Tool, ToolCall,
};
use serde_json::{Map, Value};

use super::generated::{EventType, JsonPatchOperationType};
use super::writer::{Fields, Pass, object_value_field, struct_field, value_field};
use crate::Error;

/// An event that has a protobuf form.
pub(crate) struct Known<'a>(&'a Event);

impl<'a> Known<'a> {
    /// `Err` for an [`Event::Unknown`], and for an event type newer than
    /// the frozen schema (`Event` is `#[non_exhaustive]`): neither has one.
    pub(crate) fn new(event: &'a Event) -> Result<Self, Error> {
        match event {
            Event::TextMessageStart(_)
            | Event::TextMessageContent(_)
            | Event::TextMessageEnd(_)
            | Event::ToolCallStart(_)
            | Event::ToolCallArgs(_)
            | Event::ToolCallEnd(_)
            | Event::StateSnapshot(_)
            | Event::StateDelta(_)
            | Event::MessagesSnapshot(_)
            | Event::Raw(_)
            | Event::Custom(_)
            | Event::RunStarted(_)
            | Event::RunFinished(_)
            | Event::RunError(_)
            | Event::StepStarted(_)
            | Event::StepFinished(_)
            | Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::SubagentStarted(_)
            | Event::SubagentFinished(_)
            | Event::SubagentError(_)
            | Event::ToolCallResult(_)
            | Event::ActivitySnapshot(_)
            | Event::ActivityDelta(_)
            | Event::ReasoningStart(_)
            | Event::ReasoningMessageStart(_)
            | Event::ReasoningMessageContent(_)
            | Event::ReasoningMessageEnd(_)
            | Event::ReasoningMessageChunk(_)
            | Event::ReasoningEnd(_)
            | Event::ReasoningEncryptedValue(_) => Ok(Self(event)),
            Event::Unknown(u) => Err(Error::Unrepresentable(format!(
                "event type '{}' has no protobuf form",
                u.event_type
            ))),
            other => Err(Error::Unrepresentable(format!(
                "event type '{}' has no protobuf form",
                other.event_type().map_or("?", |t| t.as_str())
            ))),
        }
    }
}

/// A plain (proto3) string: not written when empty.
#[inline]
fn string<P: Pass>(p: &mut P, field: u32, s: &str) {
    if !s.is_empty() {
        p.bytes(field, s.as_bytes());
    }
}

/// An `optional string`: written when present, even empty.
#[inline]
fn opt_string<P: Pass>(p: &mut P, field: u32, s: Option<&str>) {
    if let Some(s) = s {
        p.bytes(field, s.as_bytes());
    }
}

/// A `repeated string`: every element, even empty.
fn strings<P: Pass>(p: &mut P, field: u32, list: &[String]) {
    for s in list {
        p.bytes(field, s.as_bytes());
    }
}

/// An `optional int64`.
#[inline]
fn opt_int64<P: Pass>(p: &mut P, field: u32, v: Option<i64>) {
    if let Some(v) = v {
        // int64 is written as its two's complement, 10 bytes when negative.
        #[allow(clippy::cast_sign_loss)]
        p.varint(field, v as u64);
    }
}

/// A plain enum: not written when 0.
#[inline]
fn enumeration<P: Pass>(p: &mut P, field: u32, v: i32) {
    if v != 0 {
        // An int32 is sign-extended to 64 bits on the wire.
        #[allow(clippy::cast_sign_loss)]
        p.varint(field, i64::from(v) as u64);
    }
}

fn opt_value<P: Pass>(p: &mut P, field: u32, v: Option<&Value>) {
    if let Some(v) = v {
        value_field(p, field, v);
    }
}

fn opt_struct<P: Pass>(p: &mut P, field: u32, map: Option<&Map<String, Value>>) {
    if let Some(map) = map {
        struct_field(p, field, map);
    }
}

/// Field 1 of every event: its `BaseEvent`.
#[inline]
fn base<P: Pass>(p: &mut P, ty: EventType, b: &BaseEvent) {
    p.message(1, |p| {
        enumeration(p, 1, ty as i32);
        opt_int64(p, 2, b.timestamp);
        opt_value(p, 3, b.raw_event.as_deref());
        opt_struct(p, 4, b.metadata.as_deref());
    });
}

fn patch<P: Pass>(p: &mut P, field: u32, ops: &[PatchOperation]) {
    type T = JsonPatchOperationType;
    for op in ops {
        let (kind, path, from, value) = match &op.op {
            PatchOp::Add { path, value } => (T::Add, path, None, Some(value)),
            PatchOp::Remove { path } => (T::Remove, path, None, None),
            PatchOp::Replace { path, value } => (T::Replace, path, None, Some(value)),
            PatchOp::Move { from, path } => (T::Move, path, Some(from.as_str()), None),
            PatchOp::Copy { from, path } => (T::Copy, path, Some(from.as_str()), None),
            PatchOp::Test { path, value } => (T::Test, path, None, Some(value)),
        };
        // An operation's extra `value` or `from` (a `remove` carrying a
        // leftover value is valid RFC 6902) has a field here, as in the
        // official encoder; any other extra member has none and is lost.
        let value = value.or_else(|| op.extra.get("value"));
        let from = from.or_else(|| op.extra.get("from").and_then(Value::as_str));
        p.message(field, |p| {
            enumeration(p, 1, kind as i32);
            string(p, 2, path);
            opt_string(p, 3, from);
            opt_value(p, 4, value);
        });
    }
}

fn usage<P: Pass>(p: &mut P, field: u32, list: Option<&Vec<TokenUsage>>) {
    let count = |c: Option<u64>| c.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    for u in list.into_iter().flatten() {
        p.message(field, |p| {
            opt_string(p, 1, u.provider.as_deref());
            opt_string(p, 2, u.model.as_deref());
            opt_int64(p, 3, count(u.input_tokens));
            opt_int64(p, 4, count(u.output_tokens));
            opt_int64(p, 5, count(u.total_tokens));
            opt_int64(p, 6, count(u.reasoning_tokens));
            opt_int64(p, 7, count(u.cached_input_tokens));
            opt_int64(p, 8, count(u.cache_write_input_tokens));
        });
    }
}

/// An `InputContentSource` (a oneof: each arm is written even when empty).
fn source<P: Pass>(p: &mut P, field: u32, s: &PartSource) {
    p.message(field, |p| match s {
        PartSource::Data { value, mime_type } => p.message(1, |p| {
            string(p, 1, value);
            string(p, 2, mime_type);
        }),
        PartSource::Url { value, mime_type } => p.message(2, |p| {
            string(p, 1, value);
            opt_string(p, 2, mime_type.as_deref());
        }),
        PartSource::File {
            value,
            provider,
            mime_type,
        } => p.message(3, |p| {
            string(p, 1, value);
            opt_string(p, 2, provider.as_deref());
            opt_string(p, 3, mime_type.as_deref());
        }),
    });
}

fn parts<P: Pass>(p: &mut P, field: u32, parts: &[ContentPart]) {
    fn media<P: Pass>(p: &mut P, arm: u32, m: &MediaPart) {
        p.message(arm, |p| {
            source(p, 1, &m.source);
            opt_value(p, 2, m.metadata.as_ref());
            opt_string(p, 3, m.id.as_deref());
        });
    }
    for part in parts {
        p.message(field, |p| match part {
            ContentPart::Text(t) => p.message(1, |p| {
                string(p, 1, &t.text);
                opt_string(p, 2, t.id.as_deref());
                opt_value(p, 3, t.metadata.as_ref());
            }),
            ContentPart::Image(m) => media(p, 2, m),
            ContentPart::Audio(m) => media(p, 3, m),
            ContentPart::Video(m) => media(p, 4, m),
            ContentPart::Document(m) => media(p, 5, m),
        });
    }
}

/// String content rides in `content`, part lists in `content_parts`.
fn split(c: &Content) -> (Option<&str>, &[ContentPart]) {
    match c {
        Content::Text(t) => (Some(t), &[]),
        Content::Parts(parts) => (None, parts),
    }
}

fn tool_call<P: Pass>(p: &mut P, field: u32, c: &ToolCall) {
    p.message(field, |p| {
        string(p, 1, &c.id);
        string(p, 2, "function");
        p.message(3, |p| {
            string(p, 1, &c.function.name);
            string(p, 2, &c.function.arguments);
        });
        opt_struct(p, 4, c.metadata.as_ref());
        opt_string(p, 5, c.encrypted_value.as_deref());
        opt_string(p, 6, c.encrypted_value_type.as_deref());
    });
}

/// A message's fields by role, borrowed, before they are written in
/// field-number order.
#[derive(Default)]
struct MessageFields<'a> {
    content: Option<&'a str>,
    name: Option<&'a str>,
    tool_calls: &'a [ToolCall],
    tool_call_id: Option<&'a str>,
    error: Option<&'a str>,
    content_parts: &'a [ContentPart],
    encrypted_value: Option<&'a str>,
    activity_type: Option<&'a str>,
    activity_content: Option<&'a Map<String, Value>>,
    encrypted_value_type: Option<&'a str>,
}

fn message<P: Pass>(p: &mut P, field: u32, m: &Message) {
    let f = match m {
        Message::Developer(t) | Message::System(t) => MessageFields {
            content: Some(&t.content),
            name: t.name.as_deref(),
            encrypted_value: t.encrypted_value.as_deref(),
            encrypted_value_type: t.encrypted_value_type.as_deref(),
            ..MessageFields::default()
        },
        Message::Assistant(a) => MessageFields {
            content: a.content.as_deref(),
            name: a.name.as_deref(),
            tool_calls: a.tool_calls.as_deref().unwrap_or_default(),
            encrypted_value: a.encrypted_value.as_deref(),
            encrypted_value_type: a.encrypted_value_type.as_deref(),
            ..MessageFields::default()
        },
        Message::User(u) => {
            let (content, content_parts) = split(&u.content);
            MessageFields {
                content,
                content_parts,
                name: u.name.as_deref(),
                encrypted_value: u.encrypted_value.as_deref(),
                encrypted_value_type: u.encrypted_value_type.as_deref(),
                ..MessageFields::default()
            }
        }
        Message::Tool(t) => {
            let (content, content_parts) = split(&t.content);
            MessageFields {
                content,
                content_parts,
                tool_call_id: Some(&t.tool_call_id),
                error: t.error.as_deref(),
                encrypted_value: t.encrypted_value.as_deref(),
                encrypted_value_type: t.encrypted_value_type.as_deref(),
                ..MessageFields::default()
            }
        }
        Message::Activity(a) => MessageFields {
            activity_type: Some(&a.activity_type),
            activity_content: Some(&a.content),
            ..MessageFields::default()
        },
        Message::Reasoning(r) => MessageFields {
            content: Some(&r.content),
            encrypted_value: r.encrypted_value.as_deref(),
            encrypted_value_type: r.encrypted_value_type.as_deref(),
            ..MessageFields::default()
        },
    };
    p.message(field, |p| {
        string(p, 1, m.id());
        string(p, 2, m.role().as_str());
        opt_string(p, 3, f.content);
        opt_string(p, 4, f.name);
        for call in f.tool_calls {
            tool_call(p, 5, call);
        }
        opt_string(p, 6, f.tool_call_id);
        opt_string(p, 7, f.error);
        parts(p, 8, f.content_parts);
        opt_struct(p, 9, m.metadata());
        opt_string(p, 10, m.subagent_run_id());
        opt_string(p, 11, f.encrypted_value);
        opt_string(p, 12, f.activity_type);
        opt_struct(p, 13, f.activity_content);
        opt_string(p, 14, f.encrypted_value_type);
    });
}

fn interrupt<P: Pass>(p: &mut P, field: u32, i: &Interrupt) {
    p.message(field, |p| {
        string(p, 1, &i.id);
        string(p, 2, &i.reason);
        opt_string(p, 3, i.message.as_deref());
        opt_string(p, 4, i.tool_call_id.as_deref());
        if let Some(schema) = &i.response_schema {
            object_value_field(p, 5, schema);
        }
        opt_string(p, 6, i.expires_at.as_deref());
        if let Some(metadata) = &i.metadata {
            object_value_field(p, 7, metadata);
        }
        opt_string(p, 8, i.subagent_run_id.as_deref());
    });
}

fn tool<P: Pass>(p: &mut P, field: u32, t: &Tool) {
    p.message(field, |p| {
        string(p, 1, &t.name);
        string(p, 2, &t.description);
        opt_value(p, 3, t.parameters.as_ref());
        opt_struct(p, 4, t.metadata.as_ref());
    });
}

fn resume<P: Pass>(p: &mut P, field: u32, r: &ResumeEntry) {
    p.message(field, |p| {
        string(p, 1, &r.interrupt_id);
        string(
            p,
            2,
            match r.status {
                ResumeStatus::Resolved => "resolved",
                ResumeStatus::Cancelled => "cancelled",
            },
        );
        opt_value(p, 3, r.payload.as_ref());
        opt_struct(p, 4, r.metadata.as_ref());
    });
}

fn input<P: Pass>(p: &mut P, field: u32, i: &RunAgentInput) {
    p.message(field, |p| {
        string(p, 1, &i.thread_id);
        string(p, 2, &i.run_id);
        opt_string(p, 3, i.parent_run_id.as_deref());
        opt_value(p, 4, i.state.as_ref());
        for m in &i.messages {
            message(p, 5, m);
        }
        for t in &i.tools {
            tool(p, 6, t);
        }
        for c in &i.context {
            p.message(7, |p| {
                string(p, 1, &c.description);
                string(p, 2, &c.value);
            });
        }
        opt_value(p, 8, i.forwarded_props.as_ref());
        for r in i.resume.iter().flatten() {
            resume(p, 9, r);
        }
        opt_string(p, 10, i.protocol_version.as_deref());
    });
}

impl Fields for Known<'_> {
    /// The `ag_ui.Event` envelope: one oneof arm (field numbers as in
    /// `proto/ag_ui.proto`), written even when its message is empty.
    #[allow(clippy::too_many_lines)]
    fn fields<P: Pass>(&self, p: &mut P) {
        use EventType as T;
        match self.0 {
            Event::TextMessageStart(e) => p.message(1, |p| {
                base(p, T::TextMessageStart, &e.base);
                string(p, 2, &e.message_id);
                opt_string(p, 3, e.role.map(|r| r.as_str()));
                opt_string(p, 4, e.name.as_deref());
                opt_string(p, 5, e.subagent_run_id.as_deref());
            }),
            Event::TextMessageContent(e) => p.message(2, |p| {
                base(p, T::TextMessageContent, &e.base);
                string(p, 2, &e.message_id);
                string(p, 3, &e.delta);
                opt_string(p, 4, e.subagent_run_id.as_deref());
            }),
            Event::TextMessageEnd(e) => p.message(3, |p| {
                base(p, T::TextMessageEnd, &e.base);
                string(p, 2, &e.message_id);
                opt_string(p, 3, e.subagent_run_id.as_deref());
            }),
            Event::ToolCallStart(e) => p.message(4, |p| {
                base(p, T::ToolCallStart, &e.base);
                string(p, 2, &e.tool_call_id);
                string(p, 3, &e.tool_call_name);
                opt_string(p, 4, e.parent_message_id.as_deref());
                opt_string(p, 5, e.subagent_run_id.as_deref());
            }),
            Event::ToolCallArgs(e) => p.message(5, |p| {
                base(p, T::ToolCallArgs, &e.base);
                string(p, 2, &e.tool_call_id);
                string(p, 3, &e.delta);
                opt_string(p, 4, e.subagent_run_id.as_deref());
            }),
            Event::ToolCallEnd(e) => p.message(6, |p| {
                base(p, T::ToolCallEnd, &e.base);
                string(p, 2, &e.tool_call_id);
                opt_string(p, 3, e.subagent_run_id.as_deref());
            }),
            Event::StateSnapshot(e) => p.message(7, |p| {
                base(p, T::StateSnapshot, &e.base);
                value_field(p, 2, &e.snapshot);
                opt_string(p, 3, e.subagent_run_id.as_deref());
            }),
            Event::StateDelta(e) => p.message(8, |p| {
                base(p, T::StateDelta, &e.base);
                patch(p, 2, &e.delta);
                opt_string(p, 3, e.subagent_run_id.as_deref());
            }),
            Event::MessagesSnapshot(e) => p.message(9, |p| {
                base(p, T::MessagesSnapshot, &e.base);
                for m in &e.messages {
                    message(p, 2, m);
                }
            }),
            Event::Raw(e) => p.message(10, |p| {
                base(p, T::Raw, &e.base);
                value_field(p, 2, &e.event);
                opt_string(p, 3, e.source.as_deref());
                opt_string(p, 4, e.subagent_run_id.as_deref());
            }),
            Event::Custom(e) => p.message(11, |p| {
                base(p, T::Custom, &e.base);
                string(p, 2, &e.name);
                value_field(p, 3, &e.value);
                opt_string(p, 4, e.subagent_run_id.as_deref());
            }),
            Event::RunStarted(e) => p.message(12, |p| {
                base(p, T::RunStarted, &e.base);
                string(p, 2, &e.thread_id);
                string(p, 3, &e.run_id);
                opt_string(p, 4, e.parent_run_id.as_deref());
                if let Some(i) = &e.input {
                    input(p, 5, i);
                }
                opt_string(p, 6, e.protocol_version.as_deref());
            }),
            Event::RunFinished(e) => p.message(13, |p| {
                let (outcome, interrupts, pending): (_, &[Interrupt], &[String]) = match &e.outcome
                {
                    None => ("", &[], &[]),
                    Some(RunFinishedOutcome::Success {
                        pending_tool_call_ids,
                    }) => (
                        "success",
                        &[],
                        pending_tool_call_ids.as_deref().unwrap_or_default(),
                    ),
                    Some(RunFinishedOutcome::Interrupt { interrupts }) => {
                        ("interrupt", interrupts, &[])
                    }
                    Some(RunFinishedOutcome::Cancelled) => ("cancelled", &[], &[]),
                };
                base(p, T::RunFinished, &e.base);
                string(p, 2, &e.thread_id);
                string(p, 3, &e.run_id);
                opt_value(p, 4, e.result.as_ref());
                string(p, 5, outcome);
                for i in interrupts {
                    interrupt(p, 6, i);
                }
                usage(p, 7, e.usage.as_ref());
                strings(p, 8, pending);
            }),
            Event::RunError(e) => p.message(14, |p| {
                base(p, T::RunError, &e.base);
                opt_string(p, 2, e.code.as_deref());
                string(p, 3, &e.message);
                usage(p, 4, e.usage.as_ref());
            }),
            Event::StepStarted(e) => p.message(15, |p| {
                base(p, T::StepStarted, &e.base);
                string(p, 2, &e.step_name);
                opt_string(p, 3, e.subagent_run_id.as_deref());
            }),
            Event::StepFinished(e) => p.message(16, |p| {
                base(p, T::StepFinished, &e.base);
                string(p, 2, &e.step_name);
                opt_string(p, 3, e.subagent_run_id.as_deref());
            }),
            Event::TextMessageChunk(e) => p.message(17, |p| {
                base(p, T::TextMessageChunk, &e.base);
                opt_string(p, 2, e.message_id.as_deref());
                opt_string(p, 3, e.role.map(|r| r.as_str()));
                opt_string(p, 4, e.delta.as_deref());
                opt_string(p, 5, e.name.as_deref());
                opt_string(p, 6, e.subagent_run_id.as_deref());
            }),
            Event::ToolCallChunk(e) => p.message(18, |p| {
                base(p, T::ToolCallChunk, &e.base);
                opt_string(p, 2, e.tool_call_id.as_deref());
                opt_string(p, 3, e.tool_call_name.as_deref());
                opt_string(p, 4, e.parent_message_id.as_deref());
                opt_string(p, 5, e.delta.as_deref());
                opt_string(p, 6, e.subagent_run_id.as_deref());
            }),
            Event::SubagentStarted(e) => p.message(19, |p| {
                base(p, T::SubagentStarted, &e.base);
                string(p, 2, &e.subagent_run_id);
                string(p, 3, &e.name);
                opt_string(p, 4, e.description.as_deref());
                opt_string(p, 5, e.parent_subagent_run_id.as_deref());
                opt_string(p, 6, e.parent_tool_call_id.as_deref());
                opt_string(p, 7, e.parent_message_id.as_deref());
            }),
            Event::SubagentFinished(e) => p.message(20, |p| {
                let (outcome, interrupt_ids): (_, &[String]) = match &e.outcome {
                    None => ("", &[]),
                    Some(SubagentFinishedOutcome::Success) => ("success", &[]),
                    Some(SubagentFinishedOutcome::Suspended { interrupt_ids }) => {
                        ("suspended", interrupt_ids.as_deref().unwrap_or_default())
                    }
                };
                base(p, T::SubagentFinished, &e.base);
                string(p, 2, &e.subagent_run_id);
                opt_value(p, 3, e.result.as_ref());
                string(p, 4, outcome);
                strings(p, 5, interrupt_ids);
            }),
            Event::SubagentError(e) => p.message(21, |p| {
                base(p, T::SubagentError, &e.base);
                string(p, 2, &e.subagent_run_id);
                string(p, 3, &e.message);
                opt_string(p, 4, e.code.as_deref());
            }),
            Event::ToolCallResult(e) => p.message(22, |p| {
                let (content, content_parts) = split(&e.content);
                base(p, T::ToolCallResult, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                string(p, 3, &e.message_id);
                string(p, 4, &e.tool_call_id);
                opt_string(p, 5, content);
                opt_string(p, 6, e.role.map(|_| "tool"));
                parts(p, 7, content_parts);
            }),
            Event::ActivitySnapshot(e) => p.message(23, |p| {
                base(p, T::ActivitySnapshot, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                string(p, 3, &e.message_id);
                string(p, 4, &e.activity_type);
                struct_field(p, 5, &e.content);
                if let Some(replace) = e.replace {
                    p.varint(6, u64::from(replace));
                }
            }),
            Event::ActivityDelta(e) => p.message(24, |p| {
                base(p, T::ActivityDelta, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                string(p, 3, &e.message_id);
                string(p, 4, &e.activity_type);
                patch(p, 5, &e.patch);
            }),
            Event::ReasoningStart(e) => p.message(25, |p| {
                base(p, T::ReasoningStart, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                string(p, 3, &e.message_id);
            }),
            Event::ReasoningMessageStart(e) => p.message(26, |p| {
                base(p, T::ReasoningMessageStart, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                string(p, 3, &e.message_id);
                string(p, 4, "reasoning");
            }),
            Event::ReasoningMessageContent(e) => p.message(27, |p| {
                base(p, T::ReasoningMessageContent, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                string(p, 3, &e.message_id);
                string(p, 4, &e.delta);
            }),
            Event::ReasoningMessageEnd(e) => p.message(28, |p| {
                base(p, T::ReasoningMessageEnd, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                string(p, 3, &e.message_id);
            }),
            Event::ReasoningMessageChunk(e) => p.message(29, |p| {
                base(p, T::ReasoningMessageChunk, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                opt_string(p, 3, e.message_id.as_deref());
                opt_string(p, 4, e.delta.as_deref());
            }),
            Event::ReasoningEnd(e) => p.message(30, |p| {
                base(p, T::ReasoningEnd, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                string(p, 3, &e.message_id);
            }),
            Event::ReasoningEncryptedValue(e) => p.message(31, |p| {
                base(p, T::ReasoningEncryptedValue, &e.base);
                opt_string(p, 2, e.subagent_run_id.as_deref());
                string(
                    p,
                    3,
                    match e.subtype {
                        EncryptedValueSubtype::ToolCall => "tool-call",
                        EncryptedValueSubtype::Message => "message",
                    },
                );
                string(p, 4, &e.entity_id);
                string(p, 5, &e.encrypted_value);
                opt_string(p, 6, e.encrypted_value_type.as_deref());
            }),
            // `Known::new` refuses the rest.
            _ => {}
        }
    }
}
