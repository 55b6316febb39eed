//! protobuf → the JSON the official `@ag-ui/proto` decoder produces, which then
//! goes through the same lenient decoding (enforcement) as an SSE event.

use serde_json::{Map, Value, json};

use super::generated as pb;
use super::json::number;
use crate::Error;

type Obj = Map<String, Value>;

fn invalid(why: &str) -> Error {
    Error::Protobuf(format!("Invalid event{why}"))
}

fn put(o: &mut Obj, key: &str, value: impl Into<Value>) {
    o.insert(key.to_owned(), value.into());
}

fn put_opt(o: &mut Obj, key: &str, value: Option<impl Into<Value>>) {
    if let Some(v) = value {
        o.insert(key.to_owned(), v.into());
    }
}

fn put_value(o: &mut Obj, key: &str, value: Option<super::json::JsonValue>) {
    if let Some(v) = value.and_then(|v| v.0) {
        o.insert(key.to_owned(), v);
    }
}

fn put_struct(o: &mut Obj, key: &str, value: Option<super::json::JsonStruct>) {
    if let Some(s) = value {
        o.insert(key.to_owned(), Value::Object(s.0));
    }
}

fn int(n: i64) -> Value {
    // JavaScript reads an int64 as a double.
    #[allow(clippy::cast_precision_loss)]
    number(n as f64)
}

fn usage(list: Vec<pb::Usage>) -> Value {
    Value::Array(
        list.into_iter()
            .map(|u| {
                let mut o = Obj::new();
                put_opt(&mut o, "provider", u.provider);
                put_opt(&mut o, "model", u.model);
                put_opt(&mut o, "inputTokens", u.input_tokens.map(int));
                put_opt(&mut o, "outputTokens", u.output_tokens.map(int));
                put_opt(&mut o, "totalTokens", u.total_tokens.map(int));
                put_opt(&mut o, "reasoningTokens", u.reasoning_tokens.map(int));
                put_opt(&mut o, "cachedInputTokens", u.cached_input_tokens.map(int));
                put_opt(
                    &mut o,
                    "cacheWriteInputTokens",
                    u.cache_write_input_tokens.map(int),
                );
                Value::Object(o)
            })
            .collect(),
    )
}

fn patch(ops: Vec<pb::JsonPatchOperation>) -> Value {
    Value::Array(
        ops.into_iter()
            .map(|op| {
                let mut o = Obj::new();
                let name = match pb::JsonPatchOperationType::try_from(op.op) {
                    Ok(t) => t.as_str_name().to_lowercase(),
                    // An op this build does not know: kept as its number, so the
                    // enforcement stage drops it as an unrecognised union member.
                    Err(_) => op.op.to_string(),
                };
                put(&mut o, "op", name);
                put(&mut o, "path", op.path);
                put_opt(&mut o, "from", op.from);
                put_value(&mut o, "value", op.value);
                Value::Object(o)
            })
            .collect(),
    )
}

fn source(s: pb::InputContentSource) -> Option<Value> {
    use pb::input_content_source::Source;
    Some(match s.source? {
        Source::Data(d) => json!({"type": "data", "value": d.value, "mimeType": d.mime_type}),
        Source::Url(u) => {
            let mut o = Obj::new();
            put(&mut o, "type", "url");
            put(&mut o, "value", u.value);
            put_opt(&mut o, "mimeType", u.mime_type);
            Value::Object(o)
        }
        Source::File(f) => {
            let mut o = Obj::new();
            put(&mut o, "type", "file");
            put(&mut o, "value", f.value);
            put_opt(&mut o, "provider", f.provider);
            put_opt(&mut o, "mimeType", f.mime_type);
            Value::Object(o)
        }
    })
}

/// `None`: a part of a kind this build does not know (dropped, with a warning).
fn part(p: pb::InputContent) -> Option<Value> {
    use pb::input_content::Part;
    let (kind, src, metadata, id) = match p.part? {
        Part::Text(t) => {
            let mut o = Obj::new();
            put(&mut o, "type", "text");
            put_opt(&mut o, "id", t.id);
            put(&mut o, "text", t.text);
            put_value(&mut o, "metadata", t.metadata);
            return Some(Value::Object(o));
        }
        Part::Image(m) => ("image", m.source, m.metadata, m.id),
        Part::Audio(m) => ("audio", m.source, m.metadata, m.id),
        Part::Video(m) => ("video", m.source, m.metadata, m.id),
        Part::Document(m) => ("document", m.source, m.metadata, m.id),
    };
    let mut o = Obj::new();
    put(&mut o, "type", kind);
    put_opt(&mut o, "id", id);
    if let Some(src) = src {
        // A source of a kind this build does not know takes the part with it.
        o.insert("source".into(), source(src)?);
    }
    put_value(&mut o, "metadata", metadata);
    Some(Value::Object(o))
}

fn parts(list: Vec<pb::InputContent>) -> Value {
    Value::Array(
        list.into_iter()
            .filter_map(|p| {
                let out = part(p);
                if out.is_none() {
                    tracing::warn!(
                        "[ag-ui][proto] Dropped a content part this build does not know: the protocol has a variant this SDK predates."
                    );
                }
                out
            })
            .collect(),
    )
}

fn message(m: pb::Message) -> Result<Value, Error> {
    let role = m.role.as_str();
    let known = agwire_core::Role::from_name(role).is_some();
    let uses_parts = if known {
        role == "user" || role == "tool"
    } else {
        !m.content_parts.is_empty()
    };
    let uses_map = if known {
        role == "activity"
    } else {
        !uses_parts && m.activity_content.is_some()
    };
    let forms = usize::from(m.content.is_some())
        + usize::from(!m.content_parts.is_empty())
        + usize::from(m.activity_content.is_some());
    if !known && forms > 1 {
        return Err(invalid(": message carries more than one content form"));
    }
    if known {
        if !uses_parts && !m.content_parts.is_empty() {
            return Err(invalid(
                ": message carries content parts for a role that has none",
            ));
        }
        if m.activity_content.is_some() && !uses_map {
            return Err(invalid(
                ": message carries activity content for a non-activity role",
            ));
        }
        if uses_map && m.content.is_some() {
            return Err(invalid(
                ": activity content cannot ride with other content forms",
            ));
        }
        if uses_parts && m.content.is_some() && !m.content_parts.is_empty() {
            return Err(invalid(
                ": message carries both string content and content parts",
            ));
        }
    }
    let mut o = Obj::new();
    put(&mut o, "id", m.id);
    put(&mut o, "role", m.role.clone());
    match (uses_parts, m.content) {
        (true, None) => {
            o.insert("content".into(), parts(m.content_parts));
        }
        (_, content) => put_opt(&mut o, "content", content),
    }
    if uses_map && let Some(content) = m.activity_content {
        o.insert("content".into(), Value::Object(content.0));
    }
    put_opt(&mut o, "name", m.name);
    if !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .into_iter()
            .map(|c| {
                let mut call = Obj::new();
                put(&mut call, "id", c.id);
                put(&mut call, "type", c.r#type);
                if let Some(f) = c.function {
                    call.insert(
                        "function".into(),
                        json!({"name": f.name, "arguments": f.arguments}),
                    );
                }
                put_struct(&mut call, "metadata", c.metadata);
                put_opt(&mut call, "encryptedValue", c.encrypted_value);
                put_opt(&mut call, "encryptedValueType", c.encrypted_value_type);
                Value::Object(call)
            })
            .collect();
        put(&mut o, "toolCalls", calls);
    }
    put_opt(&mut o, "toolCallId", m.tool_call_id);
    put_opt(&mut o, "error", m.error);
    put_struct(&mut o, "metadata", m.metadata);
    put_opt(&mut o, "subagentRunId", m.subagent_run_id);
    put_opt(&mut o, "encryptedValue", m.encrypted_value);
    put_opt(&mut o, "encryptedValueType", m.encrypted_value_type);
    put_opt(&mut o, "activityType", m.activity_type);
    Ok(Value::Object(o))
}

fn messages(list: Vec<pb::Message>) -> Result<Value, Error> {
    list.into_iter()
        .map(message)
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

fn interrupt(i: pb::Interrupt) -> Value {
    let mut o = Obj::new();
    put(&mut o, "id", i.id);
    put(&mut o, "reason", i.reason);
    put_opt(&mut o, "message", i.message);
    put_opt(&mut o, "toolCallId", i.tool_call_id);
    put_value(&mut o, "responseSchema", i.response_schema);
    put_opt(&mut o, "expiresAt", i.expires_at);
    put_value(&mut o, "metadata", i.metadata);
    put_opt(&mut o, "subagentRunId", i.subagent_run_id);
    Value::Object(o)
}

fn input(i: pb::RunAgentInput) -> Result<Value, Error> {
    let mut o = Obj::new();
    put(&mut o, "threadId", i.thread_id);
    put(&mut o, "runId", i.run_id);
    put_opt(&mut o, "protocolVersion", i.protocol_version);
    put_opt(&mut o, "parentRunId", i.parent_run_id);
    put_value(&mut o, "state", i.state);
    o.insert("messages".into(), messages(i.messages)?);
    let tools: Vec<Value> = i
        .tools
        .into_iter()
        .map(|t| {
            let mut tool = Obj::new();
            put(&mut tool, "name", t.name);
            put(&mut tool, "description", t.description);
            put_value(&mut tool, "parameters", t.parameters);
            put_struct(&mut tool, "metadata", t.metadata);
            Value::Object(tool)
        })
        .collect();
    put(&mut o, "tools", tools);
    let context: Vec<Value> = i
        .context
        .into_iter()
        .map(|c| json!({"description": c.description, "value": c.value}))
        .collect();
    put(&mut o, "context", context);
    put_value(&mut o, "forwardedProps", i.forwarded_props);
    let resume: Vec<Value> = i
        .resume
        .into_iter()
        .map(|r| {
            let mut entry = Obj::new();
            put(&mut entry, "interruptId", r.interrupt_id);
            put(&mut entry, "status", r.status);
            put_value(&mut entry, "payload", r.payload);
            put_struct(&mut entry, "metadata", r.metadata);
            Value::Object(entry)
        })
        .collect();
    put(&mut o, "resume", resume);
    Ok(Value::Object(o))
}

/// The envelope's own fields, checked against the arm that carries them.
fn base(o: &mut Obj, base: Option<pb::BaseEvent>, arm: pb::EventType) -> Result<(), Error> {
    let base = base.ok_or_else(|| invalid(""))?;
    if base.r#type != arm as i32 {
        let declared = pb::EventType::try_from(base.r#type)
            .map_or_else(|_| "undefined".to_owned(), |t| t.as_str_name().to_owned());
        return Err(invalid(&format!(
            ": envelope carries {} but the base event declares {declared}",
            arm.as_str_name()
        )));
    }
    put(o, "type", arm.as_str_name());
    put_opt(o, "timestamp", base.timestamp.map(int));
    put_value(o, "rawEvent", base.raw_event);
    put_struct(o, "metadata", base.metadata);
    Ok(())
}

/// The JSON form of a decoded envelope, as `@ag-ui/proto`'s `decode` gives it.
pub(crate) fn to_json(event: pb::Event) -> Result<Value, Error> {
    use pb::EventType as T;
    use pb::event::Event as E;
    let mut o = Obj::new();
    let arm = event.event.ok_or_else(|| invalid(""))?;
    match arm {
        E::TextMessageStart(e) => {
            base(&mut o, e.base_event, T::TextMessageStart)?;
            put(&mut o, "messageId", e.message_id);
            put_opt(&mut o, "role", e.role);
            put_opt(&mut o, "name", e.name);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::TextMessageContent(e) => {
            base(&mut o, e.base_event, T::TextMessageContent)?;
            put(&mut o, "messageId", e.message_id);
            put(&mut o, "delta", e.delta);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::TextMessageEnd(e) => {
            base(&mut o, e.base_event, T::TextMessageEnd)?;
            put(&mut o, "messageId", e.message_id);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::TextMessageChunk(e) => {
            base(&mut o, e.base_event, T::TextMessageChunk)?;
            put_opt(&mut o, "messageId", e.message_id);
            put_opt(&mut o, "role", e.role);
            put_opt(&mut o, "delta", e.delta);
            put_opt(&mut o, "name", e.name);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::ToolCallStart(e) => {
            base(&mut o, e.base_event, T::ToolCallStart)?;
            put(&mut o, "toolCallId", e.tool_call_id);
            put(&mut o, "toolCallName", e.tool_call_name);
            put_opt(&mut o, "parentMessageId", e.parent_message_id);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::ToolCallArgs(e) => {
            base(&mut o, e.base_event, T::ToolCallArgs)?;
            put(&mut o, "toolCallId", e.tool_call_id);
            put(&mut o, "delta", e.delta);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::ToolCallEnd(e) => {
            base(&mut o, e.base_event, T::ToolCallEnd)?;
            put(&mut o, "toolCallId", e.tool_call_id);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::ToolCallChunk(e) => {
            base(&mut o, e.base_event, T::ToolCallChunk)?;
            put_opt(&mut o, "toolCallId", e.tool_call_id);
            put_opt(&mut o, "toolCallName", e.tool_call_name);
            put_opt(&mut o, "parentMessageId", e.parent_message_id);
            put_opt(&mut o, "delta", e.delta);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::ToolCallResult(e) => {
            base(&mut o, e.base_event, T::ToolCallResult)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "messageId", e.message_id);
            put(&mut o, "toolCallId", e.tool_call_id);
            match e.content {
                Some(_) if !e.content_parts.is_empty() => {
                    return Err(invalid(
                        ": content carries both string content and content parts",
                    ));
                }
                Some(text) => put(&mut o, "content", text),
                None => {
                    o.insert("content".into(), parts(e.content_parts));
                }
            }
            put_opt(&mut o, "role", e.role);
        }
        E::StateSnapshot(e) => {
            base(&mut o, e.base_event, T::StateSnapshot)?;
            put_value(&mut o, "snapshot", e.snapshot);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::StateDelta(e) => {
            base(&mut o, e.base_event, T::StateDelta)?;
            o.insert("delta".into(), patch(e.delta));
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::MessagesSnapshot(e) => {
            base(&mut o, e.base_event, T::MessagesSnapshot)?;
            o.insert("messages".into(), messages(e.messages)?);
        }
        E::ActivitySnapshot(e) => {
            base(&mut o, e.base_event, T::ActivitySnapshot)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "messageId", e.message_id);
            put(&mut o, "activityType", e.activity_type);
            put_struct(&mut o, "content", e.content);
            put_opt(&mut o, "replace", e.replace);
        }
        E::ActivityDelta(e) => {
            base(&mut o, e.base_event, T::ActivityDelta)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "messageId", e.message_id);
            put(&mut o, "activityType", e.activity_type);
            o.insert("patch".into(), patch(e.patch));
        }
        E::Raw(e) => {
            base(&mut o, e.base_event, T::Raw)?;
            put_value(&mut o, "event", e.event);
            put_opt(&mut o, "source", e.source);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::Custom(e) => {
            base(&mut o, e.base_event, T::Custom)?;
            put(&mut o, "name", e.name);
            put_value(&mut o, "value", e.value);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::RunStarted(e) => {
            base(&mut o, e.base_event, T::RunStarted)?;
            put(&mut o, "threadId", e.thread_id);
            put(&mut o, "runId", e.run_id);
            put_opt(&mut o, "parentRunId", e.parent_run_id);
            if let Some(i) = e.input {
                o.insert("input".into(), input(i)?);
            }
            put_opt(&mut o, "protocolVersion", e.protocol_version);
        }
        E::RunFinished(e) => {
            base(&mut o, e.base_event, T::RunFinished)?;
            put(&mut o, "threadId", e.thread_id);
            put(&mut o, "runId", e.run_id);
            put_value(&mut o, "result", e.result);
            let interrupts: Vec<Value> = e.interrupts.into_iter().map(interrupt).collect();
            let pending = e.pending_tool_call_ids;
            let mut carried = Obj::new();
            if !pending.is_empty() {
                put(&mut carried, "pendingToolCallIds", pending);
            }
            // An interrupt outcome always carries its list; others only a non-empty one.
            if e.outcome == "interrupt" || !interrupts.is_empty() {
                put(&mut carried, "interrupts", interrupts);
            }
            if e.outcome.is_empty() {
                // Without an outcome the lists have no home; they travel as
                // members the enforcement stage strips, as @ag-ui/proto leaves them.
                o.extend(carried);
            } else {
                let mut outcome = Obj::new();
                put(&mut outcome, "type", e.outcome);
                outcome.extend(carried);
                put(&mut o, "outcome", outcome);
            }
            if !e.usage.is_empty() {
                o.insert("usage".into(), usage(e.usage));
            }
        }
        E::RunError(e) => {
            base(&mut o, e.base_event, T::RunError)?;
            put_opt(&mut o, "code", e.code);
            put(&mut o, "message", e.message);
            if !e.usage.is_empty() {
                o.insert("usage".into(), usage(e.usage));
            }
        }
        E::StepStarted(e) => {
            base(&mut o, e.base_event, T::StepStarted)?;
            put(&mut o, "stepName", e.step_name);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::StepFinished(e) => {
            base(&mut o, e.base_event, T::StepFinished)?;
            put(&mut o, "stepName", e.step_name);
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
        }
        E::ReasoningStart(e) => {
            base(&mut o, e.base_event, T::ReasoningStart)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "messageId", e.message_id);
        }
        E::ReasoningMessageStart(e) => {
            base(&mut o, e.base_event, T::ReasoningMessageStart)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "messageId", e.message_id);
            put(&mut o, "role", e.role);
        }
        E::ReasoningMessageContent(e) => {
            base(&mut o, e.base_event, T::ReasoningMessageContent)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "messageId", e.message_id);
            put(&mut o, "delta", e.delta);
        }
        E::ReasoningMessageEnd(e) => {
            base(&mut o, e.base_event, T::ReasoningMessageEnd)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "messageId", e.message_id);
        }
        E::ReasoningMessageChunk(e) => {
            base(&mut o, e.base_event, T::ReasoningMessageChunk)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put_opt(&mut o, "messageId", e.message_id);
            put_opt(&mut o, "delta", e.delta);
        }
        E::ReasoningEnd(e) => {
            base(&mut o, e.base_event, T::ReasoningEnd)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "messageId", e.message_id);
        }
        E::ReasoningEncryptedValue(e) => {
            base(&mut o, e.base_event, T::ReasoningEncryptedValue)?;
            put_opt(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "subtype", e.subtype);
            put(&mut o, "entityId", e.entity_id);
            put(&mut o, "encryptedValue", e.encrypted_value);
            put_opt(&mut o, "encryptedValueType", e.encrypted_value_type);
        }
        E::SubagentStarted(e) => {
            base(&mut o, e.base_event, T::SubagentStarted)?;
            put(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "name", e.name);
            put_opt(&mut o, "description", e.description);
            put_opt(&mut o, "parentSubagentRunId", e.parent_subagent_run_id);
            put_opt(&mut o, "parentToolCallId", e.parent_tool_call_id);
            put_opt(&mut o, "parentMessageId", e.parent_message_id);
        }
        E::SubagentFinished(e) => {
            base(&mut o, e.base_event, T::SubagentFinished)?;
            put(&mut o, "subagentRunId", e.subagent_run_id);
            put_value(&mut o, "result", e.result);
            let mut carried = Obj::new();
            if !e.interrupt_ids.is_empty() {
                put(&mut carried, "interruptIds", e.interrupt_ids);
            }
            if e.outcome.is_empty() {
                o.extend(carried);
            } else {
                let mut outcome = Obj::new();
                put(&mut outcome, "type", e.outcome);
                outcome.extend(carried);
                put(&mut o, "outcome", outcome);
            }
        }
        E::SubagentError(e) => {
            base(&mut o, e.base_event, T::SubagentError)?;
            put(&mut o, "subagentRunId", e.subagent_run_id);
            put(&mut o, "message", e.message);
            put_opt(&mut o, "code", e.code);
        }
    }
    Ok(Value::Object(o))
}

/// The direct path for the events a stream is mostly made of (text, argument
/// and reasoning deltas); anything else is handed back for the JSON route.
pub(crate) fn streamed(
    event: pb::Event,
) -> Result<Result<agwire_core::Decoded<agwire_core::Event>, pb::Event>, Error> {
    use agwire_core::{
        Event as Core, ReasoningMessageContentEvent, TextMessageContentEvent, ToolCallArgsEvent,
    };
    use pb::EventType as T;
    use pb::event::Event as E;
    let mut warnings = Vec::new();
    let event =
        match event.event {
            Some(E::TextMessageContent(e)) => Core::TextMessageContent({
                let mut event = TextMessageContentEvent::new(e.message_id, e.delta).base(
                    direct_base(e.base_event, T::TextMessageContent, &mut warnings)?,
                );
                event.subagent_run_id = e.subagent_run_id;
                event
            }),
            Some(E::ToolCallArgs(e)) => {
                Core::ToolCallArgs({
                    let mut event = ToolCallArgsEvent::new(e.tool_call_id, e.delta)
                        .base(direct_base(e.base_event, T::ToolCallArgs, &mut warnings)?);
                    event.subagent_run_id = e.subagent_run_id;
                    event
                })
            }
            Some(E::ReasoningMessageContent(e)) => Core::ReasoningMessageContent({
                let mut event = ReasoningMessageContentEvent::new(e.message_id, e.delta).base(
                    direct_base(e.base_event, T::ReasoningMessageContent, &mut warnings)?,
                );
                event.subagent_run_id = e.subagent_run_id;
                event
            }),
            other => return Ok(Err(pb::Event { event: other })),
        };
    Ok(Ok(agwire_core::Decoded {
        value: event,
        warnings,
    }))
}

/// The envelope, checked exactly as lenient decoding checks it.
fn direct_base(
    base: Option<pb::BaseEvent>,
    arm: pb::EventType,
    warnings: &mut Vec<agwire_core::Warning>,
) -> Result<agwire_core::BaseEvent, Error> {
    let base = base.ok_or_else(|| invalid(""))?;
    if base.r#type != arm as i32 {
        // The JSON route words this error; take it.
        let mut o = Obj::new();
        return Err(self::base(&mut o, Some(base), arm)
            .err()
            .unwrap_or_else(|| invalid("")));
    }
    if let Some(t) = base.timestamp
        && t.unsigned_abs() > agwire_core::decode::MAX_SAFE_INTEGER.unsigned_abs()
    {
        return Err(Error::Decode(agwire_core::DecodeError {
            context: arm.as_str_name().to_owned(),
            path: "/timestamp".to_owned(),
            reason: "integer outside the safe range ±(2^53 - 1)".to_owned(),
        }));
    }
    let raw_event = match base.raw_event.and_then(|v| v.0) {
        Some(Value::Null) => {
            warnings.push(agwire_core::Warning::legacy_null(
                arm.as_str_name(),
                "/rawEvent",
            ));
            None
        }
        other => other.map(Box::new),
    };
    let mut envelope = agwire_core::BaseEvent::default();
    envelope.timestamp = base.timestamp;
    envelope.raw_event = raw_event;
    envelope.metadata = base.metadata.map(|m| Box::new(m.0));
    Ok(envelope)
}
