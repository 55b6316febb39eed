//! The protobuf oracle: `agwire_core::Event` → the generated message tree,
//! with the official mapping rules (flattened outcomes, array content as
//! `content_parts`, activity content as `activity_content`, patch ops as an
//! enum — their extra members are lost on this wire —, usage as a repeated
//! field), encoded by prost.
//!
//! agwire-codec writes the same mapping straight to bytes
//! (`proto::encode_event`, no tree); this second, independent writing of it
//! through prost's own encoder is what the codec's tests hold those bytes to
//! (`tests/proto_direct.rs`), beside the official SDKs' encoders. It lives
//! here, not in the library, because nothing but a test needs a second
//! mapping.

use agwire_core::{
    Content, ContentPart, Event, Interrupt, MediaPart, Message, PartSource, PatchOp,
    PatchOperation, ResumeEntry, RunAgentInput, RunFinishedOutcome, SubagentFinishedOutcome,
    TokenUsage, Tool, ToolCall,
};

use agwire_codec::Error;
use agwire_codec::proto::generated as pb;
use agwire_codec::proto::json::{JsonStruct, JsonValue};
use serde_json::{Map, Value};

/// A JSON value for a `google.protobuf.Value` field.
fn to_value(json: &Value) -> JsonValue {
    JsonValue(Some(json.clone()))
}

/// A JSON object for a `google.protobuf.Struct` field.
fn to_struct(map: &Map<String, Value>) -> JsonStruct {
    JsonStruct(map.clone())
}

fn base(event_type: pb::EventType, b: &agwire_core::BaseEvent) -> Option<pb::BaseEvent> {
    Some(pb::BaseEvent {
        r#type: event_type as i32,
        timestamp: b.timestamp,
        raw_event: b.raw_event.as_deref().map(to_value),
        metadata: b.metadata.as_deref().map(to_struct),
    })
}

fn patch(ops: &[PatchOperation]) -> Vec<pb::JsonPatchOperation> {
    ops.iter()
        .map(|op| {
            let (kind, path, from, value) = match &op.op {
                PatchOp::Add { path, value } => {
                    (pb::JsonPatchOperationType::Add, path, None, Some(value))
                }
                PatchOp::Remove { path } => (pb::JsonPatchOperationType::Remove, path, None, None),
                PatchOp::Replace { path, value } => {
                    (pb::JsonPatchOperationType::Replace, path, None, Some(value))
                }
                PatchOp::Move { from, path } => {
                    (pb::JsonPatchOperationType::Move, path, Some(from), None)
                }
                PatchOp::Copy { from, path } => {
                    (pb::JsonPatchOperationType::Copy, path, Some(from), None)
                }
                PatchOp::Test { path, value } => {
                    (pb::JsonPatchOperationType::Test, path, None, Some(value))
                }
            };
            // An operation's extra `value` or `from` (a `remove` carrying a
            // leftover value is valid RFC 6902) has a field here, as in the
            // official encoder; any other extra member has none and is lost.
            let value = value.or_else(|| op.extra.get("value"));
            let from = from.cloned().or_else(|| {
                op.extra
                    .get("from")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
            });
            pb::JsonPatchOperation {
                op: kind as i32,
                path: path.clone(),
                from,
                value: value.map(to_value),
            }
        })
        .collect()
}

fn usage(list: Option<&Vec<TokenUsage>>) -> Vec<pb::Usage> {
    let count = |c: Option<u64>| c.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    list.into_iter()
        .flatten()
        .map(|u| pb::Usage {
            provider: u.provider.clone(),
            model: u.model.clone(),
            input_tokens: count(u.input_tokens),
            output_tokens: count(u.output_tokens),
            total_tokens: count(u.total_tokens),
            reasoning_tokens: count(u.reasoning_tokens),
            cached_input_tokens: count(u.cached_input_tokens),
            cache_write_input_tokens: count(u.cache_write_input_tokens),
        })
        .collect()
}

fn source(s: &PartSource) -> pb::InputContentSource {
    use pb::input_content_source::Source;
    let source = match s {
        PartSource::Data { value, mime_type } => Source::Data(pb::InputContentDataSource {
            value: value.clone(),
            mime_type: mime_type.clone(),
        }),
        PartSource::Url { value, mime_type } => Source::Url(pb::InputContentUrlSource {
            value: value.clone(),
            mime_type: mime_type.clone(),
        }),
        PartSource::File {
            value,
            provider,
            mime_type,
        } => Source::File(pb::InputContentFileSource {
            value: value.clone(),
            provider: provider.clone(),
            mime_type: mime_type.clone(),
        }),
    };
    pb::InputContentSource {
        source: Some(source),
    }
}

fn parts(parts: &[ContentPart]) -> Vec<pb::InputContent> {
    use pb::input_content::Part;
    fn media(
        m: &MediaPart,
    ) -> (
        Option<pb::InputContentSource>,
        Option<JsonValue>,
        Option<String>,
    ) {
        (
            Some(source(&m.source)),
            m.metadata.as_ref().map(to_value),
            m.id.clone(),
        )
    }
    parts
        .iter()
        .map(|p| {
            let part = match p {
                ContentPart::Text(t) => Part::Text(pb::TextInputPart {
                    text: t.text.clone(),
                    id: t.id.clone(),
                    metadata: t.metadata.as_ref().map(to_value),
                }),
                ContentPart::Image(m) => {
                    let (source, metadata, id) = media(m);
                    Part::Image(pb::ImageInputPart {
                        source,
                        metadata,
                        id,
                    })
                }
                ContentPart::Audio(m) => {
                    let (source, metadata, id) = media(m);
                    Part::Audio(pb::AudioInputPart {
                        source,
                        metadata,
                        id,
                    })
                }
                ContentPart::Video(m) => {
                    let (source, metadata, id) = media(m);
                    Part::Video(pb::VideoInputPart {
                        source,
                        metadata,
                        id,
                    })
                }
                ContentPart::Document(m) => {
                    let (source, metadata, id) = media(m);
                    Part::Document(pb::DocumentInputPart {
                        source,
                        metadata,
                        id,
                    })
                }
            };
            pb::InputContent { part: Some(part) }
        })
        .collect()
}

/// String content rides in `content`, part lists in `content_parts`.
fn content(c: &Content) -> (Option<String>, Vec<pb::InputContent>) {
    match c {
        Content::Text(t) => (Some(t.clone()), Vec::new()),
        Content::Parts(p) => (None, parts(p)),
    }
}

fn tool_call(c: &ToolCall) -> pb::ToolCall {
    pb::ToolCall {
        id: c.id.clone(),
        r#type: "function".to_owned(),
        function: Some(pb::tool_call::Function {
            name: c.function.name.clone(),
            arguments: c.function.arguments.clone(),
        }),
        metadata: c.metadata.as_ref().map(to_struct),
        encrypted_value: c.encrypted_value.clone(),
        encrypted_value_type: c.encrypted_value_type.clone(),
    }
}

pub(crate) fn message(m: &Message) -> pb::Message {
    let mut out = pb::Message {
        id: m.id().to_owned(),
        role: m.role().as_str().to_owned(),
        metadata: m.metadata().map(to_struct),
        subagent_run_id: m.subagent_run_id().map(str::to_owned),
        ..pb::Message::default()
    };
    match m {
        Message::Developer(t) | Message::System(t) => {
            out.content = Some(t.content.clone());
            out.name.clone_from(&t.name);
            out.encrypted_value.clone_from(&t.encrypted_value);
            out.encrypted_value_type.clone_from(&t.encrypted_value_type);
        }
        Message::Assistant(a) => {
            out.content.clone_from(&a.content);
            out.name.clone_from(&a.name);
            out.tool_calls = a.tool_calls.iter().flatten().map(tool_call).collect();
            out.encrypted_value.clone_from(&a.encrypted_value);
            out.encrypted_value_type.clone_from(&a.encrypted_value_type);
        }
        Message::User(u) => {
            (out.content, out.content_parts) = content(&u.content);
            out.name.clone_from(&u.name);
            out.encrypted_value.clone_from(&u.encrypted_value);
            out.encrypted_value_type.clone_from(&u.encrypted_value_type);
        }
        Message::Tool(t) => {
            (out.content, out.content_parts) = content(&t.content);
            out.tool_call_id = Some(t.tool_call_id.clone());
            out.error.clone_from(&t.error);
            out.encrypted_value.clone_from(&t.encrypted_value);
            out.encrypted_value_type.clone_from(&t.encrypted_value_type);
        }
        Message::Activity(a) => {
            out.activity_type = Some(a.activity_type.clone());
            out.activity_content = Some(to_struct(&a.content));
        }
        Message::Reasoning(r) => {
            out.content = Some(r.content.clone());
            out.encrypted_value.clone_from(&r.encrypted_value);
            out.encrypted_value_type.clone_from(&r.encrypted_value_type);
        }
    }
    out
}

fn interrupt(i: &Interrupt) -> pb::Interrupt {
    pb::Interrupt {
        id: i.id.clone(),
        reason: i.reason.clone(),
        message: i.message.clone(),
        tool_call_id: i.tool_call_id.clone(),
        response_schema: i
            .response_schema
            .as_ref()
            .map(|s| JsonValue(Some(serde_json::Value::Object(s.clone())))),
        expires_at: i.expires_at.clone(),
        metadata: i
            .metadata
            .as_ref()
            .map(|m| JsonValue(Some(serde_json::Value::Object(m.clone())))),
        subagent_run_id: i.subagent_run_id.clone(),
    }
}

fn tool(t: &Tool) -> pb::Tool {
    pb::Tool {
        name: t.name.clone(),
        description: t.description.clone(),
        parameters: t.parameters.as_ref().map(to_value),
        metadata: t.metadata.as_ref().map(to_struct),
    }
}

fn resume(r: &ResumeEntry) -> pb::ResumeEntry {
    pb::ResumeEntry {
        interrupt_id: r.interrupt_id.clone(),
        status: match r.status {
            agwire_core::ResumeStatus::Resolved => "resolved".to_owned(),
            agwire_core::ResumeStatus::Cancelled => "cancelled".to_owned(),
        },
        payload: r.payload.as_ref().map(to_value),
        metadata: r.metadata.as_ref().map(to_struct),
    }
}

fn input(i: &RunAgentInput) -> pb::RunAgentInput {
    pb::RunAgentInput {
        thread_id: i.thread_id.clone(),
        run_id: i.run_id.clone(),
        parent_run_id: i.parent_run_id.clone(),
        state: i.state.as_ref().map(to_value),
        messages: i.messages.iter().map(message).collect(),
        tools: i.tools.iter().map(tool).collect(),
        context: i
            .context
            .iter()
            .map(|c| pb::Context {
                description: c.description.clone(),
                value: c.value.clone(),
            })
            .collect(),
        forwarded_props: i.forwarded_props.as_ref().map(to_value),
        resume: i.resume.iter().flatten().map(resume).collect(),
        protocol_version: i.protocol_version.clone(),
    }
}

/// The protobuf form of an event. An [`Event::Unknown`] has none.
pub fn to_proto(event: &Event) -> Result<pb::Event, Error> {
    use pb::EventType as T;
    use pb::event::Event as E;
    let arm = match event {
        Event::TextMessageStart(e) => E::TextMessageStart(pb::TextMessageStartEvent {
            base_event: base(T::TextMessageStart, &e.base),
            message_id: e.message_id.clone(),
            role: e.role.map(|r| r.as_str().to_owned()),
            name: e.name.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::TextMessageContent(e) => E::TextMessageContent(pb::TextMessageContentEvent {
            base_event: base(T::TextMessageContent, &e.base),
            message_id: e.message_id.clone(),
            delta: e.delta.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::TextMessageEnd(e) => E::TextMessageEnd(pb::TextMessageEndEvent {
            base_event: base(T::TextMessageEnd, &e.base),
            message_id: e.message_id.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::TextMessageChunk(e) => E::TextMessageChunk(pb::TextMessageChunkEvent {
            base_event: base(T::TextMessageChunk, &e.base),
            message_id: e.message_id.clone(),
            role: e.role.map(|r| r.as_str().to_owned()),
            delta: e.delta.clone(),
            name: e.name.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::ToolCallStart(e) => E::ToolCallStart(pb::ToolCallStartEvent {
            base_event: base(T::ToolCallStart, &e.base),
            tool_call_id: e.tool_call_id.clone(),
            tool_call_name: e.tool_call_name.clone(),
            parent_message_id: e.parent_message_id.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::ToolCallArgs(e) => E::ToolCallArgs(pb::ToolCallArgsEvent {
            base_event: base(T::ToolCallArgs, &e.base),
            tool_call_id: e.tool_call_id.clone(),
            delta: e.delta.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::ToolCallEnd(e) => E::ToolCallEnd(pb::ToolCallEndEvent {
            base_event: base(T::ToolCallEnd, &e.base),
            tool_call_id: e.tool_call_id.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::ToolCallChunk(e) => E::ToolCallChunk(pb::ToolCallChunkEvent {
            base_event: base(T::ToolCallChunk, &e.base),
            tool_call_id: e.tool_call_id.clone(),
            tool_call_name: e.tool_call_name.clone(),
            parent_message_id: e.parent_message_id.clone(),
            delta: e.delta.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::ToolCallResult(e) => {
            let (content, content_parts) = content(&e.content);
            E::ToolCallResult(pb::ToolCallResultEvent {
                base_event: base(T::ToolCallResult, &e.base),
                subagent_run_id: e.subagent_run_id.clone(),
                message_id: e.message_id.clone(),
                tool_call_id: e.tool_call_id.clone(),
                content,
                role: e.role.map(|_| "tool".to_owned()),
                content_parts,
            })
        }
        Event::StateSnapshot(e) => E::StateSnapshot(pb::StateSnapshotEvent {
            base_event: base(T::StateSnapshot, &e.base),
            snapshot: Some(to_value(&e.snapshot)),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::StateDelta(e) => E::StateDelta(pb::StateDeltaEvent {
            base_event: base(T::StateDelta, &e.base),
            delta: patch(&e.delta),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::MessagesSnapshot(e) => E::MessagesSnapshot(pb::MessagesSnapshotEvent {
            base_event: base(T::MessagesSnapshot, &e.base),
            messages: e.messages.iter().map(message).collect(),
        }),
        Event::ActivitySnapshot(e) => E::ActivitySnapshot(pb::ActivitySnapshotEvent {
            base_event: base(T::ActivitySnapshot, &e.base),
            subagent_run_id: e.subagent_run_id.clone(),
            message_id: e.message_id.clone(),
            activity_type: e.activity_type.clone(),
            content: Some(to_struct(&e.content)),
            replace: e.replace,
        }),
        Event::ActivityDelta(e) => E::ActivityDelta(pb::ActivityDeltaEvent {
            base_event: base(T::ActivityDelta, &e.base),
            subagent_run_id: e.subagent_run_id.clone(),
            message_id: e.message_id.clone(),
            activity_type: e.activity_type.clone(),
            patch: patch(&e.patch),
        }),
        Event::Raw(e) => E::Raw(pb::RawEvent {
            base_event: base(T::Raw, &e.base),
            event: Some(to_value(&e.event)),
            source: e.source.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::Custom(e) => E::Custom(pb::CustomEvent {
            base_event: base(T::Custom, &e.base),
            name: e.name.clone(),
            value: Some(to_value(&e.value)),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::RunStarted(e) => E::RunStarted(pb::RunStartedEvent {
            base_event: base(T::RunStarted, &e.base),
            thread_id: e.thread_id.clone(),
            run_id: e.run_id.clone(),
            parent_run_id: e.parent_run_id.clone(),
            input: e.input.as_deref().map(input),
            protocol_version: e.protocol_version.clone(),
        }),
        Event::RunFinished(e) => {
            let (outcome, interrupts, pending) = match &e.outcome {
                None => ("", Vec::new(), Vec::new()),
                Some(RunFinishedOutcome::Success {
                    pending_tool_call_ids,
                }) => (
                    "success",
                    Vec::new(),
                    pending_tool_call_ids.clone().unwrap_or_default(),
                ),
                Some(RunFinishedOutcome::Interrupt { interrupts }) => (
                    "interrupt",
                    interrupts.iter().map(interrupt).collect(),
                    Vec::new(),
                ),
                Some(RunFinishedOutcome::Cancelled) => ("cancelled", Vec::new(), Vec::new()),
            };
            E::RunFinished(pb::RunFinishedEvent {
                base_event: base(T::RunFinished, &e.base),
                thread_id: e.thread_id.clone(),
                run_id: e.run_id.clone(),
                result: e.result.as_ref().map(to_value),
                outcome: outcome.to_owned(),
                interrupts,
                usage: usage(e.usage.as_ref()),
                pending_tool_call_ids: pending,
            })
        }
        Event::RunError(e) => E::RunError(pb::RunErrorEvent {
            base_event: base(T::RunError, &e.base),
            code: e.code.clone(),
            message: e.message.clone(),
            usage: usage(e.usage.as_ref()),
        }),
        Event::StepStarted(e) => E::StepStarted(pb::StepStartedEvent {
            base_event: base(T::StepStarted, &e.base),
            step_name: e.step_name.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::StepFinished(e) => E::StepFinished(pb::StepFinishedEvent {
            base_event: base(T::StepFinished, &e.base),
            step_name: e.step_name.clone(),
            subagent_run_id: e.subagent_run_id.clone(),
        }),
        Event::ReasoningStart(e) => E::ReasoningStart(pb::ReasoningStartEvent {
            base_event: base(T::ReasoningStart, &e.base),
            subagent_run_id: e.subagent_run_id.clone(),
            message_id: e.message_id.clone(),
        }),
        Event::ReasoningMessageStart(e) => {
            E::ReasoningMessageStart(pb::ReasoningMessageStartEvent {
                base_event: base(T::ReasoningMessageStart, &e.base),
                subagent_run_id: e.subagent_run_id.clone(),
                message_id: e.message_id.clone(),
                role: "reasoning".to_owned(),
            })
        }
        Event::ReasoningMessageContent(e) => {
            E::ReasoningMessageContent(pb::ReasoningMessageContentEvent {
                base_event: base(T::ReasoningMessageContent, &e.base),
                subagent_run_id: e.subagent_run_id.clone(),
                message_id: e.message_id.clone(),
                delta: e.delta.clone(),
            })
        }
        Event::ReasoningMessageEnd(e) => E::ReasoningMessageEnd(pb::ReasoningMessageEndEvent {
            base_event: base(T::ReasoningMessageEnd, &e.base),
            subagent_run_id: e.subagent_run_id.clone(),
            message_id: e.message_id.clone(),
        }),
        Event::ReasoningMessageChunk(e) => {
            E::ReasoningMessageChunk(pb::ReasoningMessageChunkEvent {
                base_event: base(T::ReasoningMessageChunk, &e.base),
                subagent_run_id: e.subagent_run_id.clone(),
                message_id: e.message_id.clone(),
                delta: e.delta.clone(),
            })
        }
        Event::ReasoningEnd(e) => E::ReasoningEnd(pb::ReasoningEndEvent {
            base_event: base(T::ReasoningEnd, &e.base),
            subagent_run_id: e.subagent_run_id.clone(),
            message_id: e.message_id.clone(),
        }),
        Event::ReasoningEncryptedValue(e) => {
            E::ReasoningEncryptedValue(pb::ReasoningEncryptedValueEvent {
                base_event: base(T::ReasoningEncryptedValue, &e.base),
                subagent_run_id: e.subagent_run_id.clone(),
                subtype: match e.subtype {
                    agwire_core::EncryptedValueSubtype::ToolCall => "tool-call".to_owned(),
                    agwire_core::EncryptedValueSubtype::Message => "message".to_owned(),
                },
                entity_id: e.entity_id.clone(),
                encrypted_value: e.encrypted_value.clone(),
                encrypted_value_type: e.encrypted_value_type.clone(),
            })
        }
        Event::SubagentStarted(e) => E::SubagentStarted(pb::SubagentStartedEvent {
            base_event: base(T::SubagentStarted, &e.base),
            subagent_run_id: e.subagent_run_id.clone(),
            name: e.name.clone(),
            description: e.description.clone(),
            parent_subagent_run_id: e.parent_subagent_run_id.clone(),
            parent_tool_call_id: e.parent_tool_call_id.clone(),
            parent_message_id: e.parent_message_id.clone(),
        }),
        Event::SubagentFinished(e) => {
            let (outcome, interrupt_ids) = match &e.outcome {
                None => ("", Vec::new()),
                Some(SubagentFinishedOutcome::Success) => ("success", Vec::new()),
                Some(SubagentFinishedOutcome::Suspended { interrupt_ids }) => {
                    ("suspended", interrupt_ids.clone().unwrap_or_default())
                }
            };
            E::SubagentFinished(pb::SubagentFinishedEvent {
                base_event: base(T::SubagentFinished, &e.base),
                subagent_run_id: e.subagent_run_id.clone(),
                result: e.result.as_ref().map(to_value),
                outcome: outcome.to_owned(),
                interrupt_ids,
            })
        }
        Event::SubagentError(e) => E::SubagentError(pb::SubagentErrorEvent {
            base_event: base(T::SubagentError, &e.base),
            subagent_run_id: e.subagent_run_id.clone(),
            message: e.message.clone(),
            code: e.code.clone(),
        }),
        Event::Unknown(u) => {
            return Err(Error::Unrepresentable(format!(
                "event type '{}' has no protobuf form",
                u.event_type
            )));
        }
        // A type newer than the frozen schema (`Event` is non-exhaustive).
        other => {
            return Err(Error::Unrepresentable(format!(
                "event type '{}' has no protobuf form",
                other.event_type().map_or("?", |t| t.as_str())
            )));
        }
    };
    Ok(pb::Event { event: Some(arm) })
}
