//! Chunk expansion: `*_CHUNK` events into start/content/end triads.
//!
//! Behaves exactly like `transformChunks` of the reference client
//! (`@ag-ui/client` 1.x): the same synthesized events, the same fields on them
//! and the same error messages, so that a stream expands identically here and
//! there.
//!
//! Chunks are assembled per *lane*, the subagent a chunk is attributed to (no
//! `subagentRunId` is the parent agent's lane), and each lane has at most one
//! stream in progress. The shorthand lets a continuation omit both its id and
//! its attribution, which is why the lane sometimes has to be inferred.
//!
//! A stream that ends while a lane is still open gets no synthesized END: the
//! reference client discards those, so dropping the expander is the faithful
//! way to end a stream.

use std::fmt::Write as _;

use crate::Metadata;
use crate::event::{
    BaseEvent, Event, ReasoningMessageChunkEvent, ReasoningMessageContentEvent,
    ReasoningMessageEndEvent, ReasoningMessageStartEvent, ReasoningRole, TextMessageChunkEvent,
    TextMessageContentEvent, TextMessageEndEvent, TextMessageRole, TextMessageStartEvent,
    ToolCallArgsEvent, ToolCallChunkEvent, ToolCallEndEvent, ToolCallStartEvent,
};

/// A chunk event that cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ChunkError {
    /// The reference client's message.
    pub message: String,
}

impl ChunkError {
    fn new(message: String) -> Self {
        Self { message }
    }
}

/// Expands `TEXT_MESSAGE_CHUNK`, `TOOL_CALL_CHUNK` and `REASONING_MESSAGE_CHUNK`
/// into the events they abbreviate, and closes the streams they open when a
/// later event ends them.
///
/// A failed [`push`](Self::push) leaves the expander exactly as it was and emits
/// nothing; the reference client ends the stream at that point, and so should
/// the caller.
#[derive(Debug, Clone, Default)]
pub struct ChunkExpander {
    /// Open streams in the order their lanes opened them, which is the order a
    /// run-level event closes them in. Rarely more than a handful, so a vector
    /// beats a map here.
    lanes: Vec<Lane>,
}

#[derive(Debug, Clone)]
struct Lane {
    /// Also the `subagentRunId` of every event synthesized for this lane: an
    /// opener's tag is what names its lane, and a continuation's tag either
    /// names the same lane or is rejected.
    owner: Option<String>,
    stream: Stream,
}

/// What the opener established, kept so that continuations can be checked
/// against it.
#[derive(Debug, Clone)]
enum Stream {
    Text {
        message_id: String,
        /// The defaulted `assistant` counts as established too.
        role: TextMessageRole,
        name: Option<String>,
    },
    Tool {
        tool_call_id: String,
        tool_call_name: String,
        parent_message_id: Option<String>,
    },
    Reasoning {
        message_id: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Tool,
    Reasoning,
}

impl Kind {
    fn chunk_type(self) -> &'static str {
        match self {
            Kind::Text => "TEXT_MESSAGE_CHUNK",
            Kind::Tool => "TOOL_CALL_CHUNK",
            Kind::Reasoning => "REASONING_MESSAGE_CHUNK",
        }
    }

    fn entity(self) -> &'static str {
        match self {
            Kind::Text => "text message",
            Kind::Tool => "tool call",
            Kind::Reasoning => "reasoning message",
        }
    }

    fn id_field(self) -> &'static str {
        match self {
            Kind::Tool => "toolCallId",
            Kind::Text | Kind::Reasoning => "messageId",
        }
    }
}

impl Stream {
    fn kind(&self) -> Kind {
        match self {
            Stream::Text { .. } => Kind::Text,
            Stream::Tool { .. } => Kind::Tool,
            Stream::Reasoning { .. } => Kind::Reasoning,
        }
    }

    fn id(&self) -> &str {
        match self {
            Stream::Text { message_id, .. } | Stream::Reasoning { message_id } => message_id,
            Stream::Tool { tool_call_id, .. } => tool_call_id,
        }
    }

    fn holds(&self, kind: Kind, id: &str) -> bool {
        self.kind() == kind && self.id() == id
    }
}

/// The kind-specific fields a chunk may use to open a stream (and may repeat,
/// unchanged, on a continuation).
enum Opener {
    Text {
        role: Option<TextMessageRole>,
        name: Option<String>,
    },
    Tool {
        name: Option<String>,
        parent_message_id: Option<String>,
    },
    Reasoning,
}

impl Opener {
    fn kind(&self) -> Kind {
        match self {
            Opener::Text { .. } => Kind::Text,
            Opener::Tool { .. } => Kind::Tool,
            Opener::Reasoning => Kind::Reasoning,
        }
    }
}

/// One chunk, whatever its kind, taken apart.
struct Chunk {
    opener: Opener,
    id: Option<String>,
    delta: Option<String>,
    tag: Option<String>,
    /// `timestamp` is deliberately dropped: no synthesized event carries it.
    raw_event: Option<Box<serde_json::Value>>,
    metadata: Option<Box<Metadata>>,
}

impl Chunk {
    fn new(
        opener: Opener,
        id: Option<String>,
        delta: Option<String>,
        tag: Option<String>,
        base: BaseEvent,
    ) -> Self {
        Self {
            opener,
            id,
            delta,
            tag,
            raw_event: base.raw_event,
            metadata: base.metadata,
        }
    }
}

/// How a non-chunk event affects the open streams.
enum Closes<'a> {
    Nothing,
    Lane(Option<&'a str>),
    All,
}

fn closes(event: &Event) -> Closes<'_> {
    match event {
        // Run-level events speak for the run as a whole, and a snapshot restates
        // the whole conversation, so no lane may outlive them.
        Event::RunStarted(_)
        | Event::RunFinished(_)
        | Event::RunError(_)
        | Event::MessagesSnapshot(_) => Closes::All,
        // A subagent's terminal ends only that subagent's stream.
        Event::SubagentFinished(e) => Closes::Lane(Some(&e.subagent_run_id)),
        Event::SubagentError(e) => Closes::Lane(Some(&e.subagent_run_id)),
        // Explicit events end whatever their own lane was assembling; untagged
        // ones belong to the parent.
        Event::TextMessageStart(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::TextMessageContent(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::TextMessageEnd(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::ToolCallStart(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::ToolCallArgs(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::ToolCallEnd(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::ToolCallResult(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::StateSnapshot(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::StateDelta(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::Custom(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::StepStarted(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::StepFinished(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::ReasoningStart(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::ReasoningMessageStart(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::ReasoningMessageContent(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::ReasoningMessageEnd(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        Event::ReasoningEnd(e) => Closes::Lane(e.subagent_run_id.as_deref()),
        // These stand aside from assembly, as does a type the reference does not
        // know: it is not this stage's to judge, and closing on it would end a
        // message the event never spoke about. Chunks never get here.
        Event::Raw(_)
        | Event::ActivitySnapshot(_)
        | Event::ActivityDelta(_)
        | Event::ReasoningEncryptedValue(_)
        | Event::SubagentStarted(_)
        | Event::Unknown(_)
        | Event::TextMessageChunk(_)
        | Event::ToolCallChunk(_)
        | Event::ReasoningMessageChunk(_) => Closes::Nothing,
    }
}

/// The synthesized END for a stream that is being closed. It carries the id and
/// the owner, nothing else: the event that caused the close has no say in it.
fn end_event(lane: Lane) -> Event {
    let subagent_run_id = lane.owner;
    let base = BaseEvent::default();
    match lane.stream {
        Stream::Text { message_id, .. } => Event::TextMessageEnd(TextMessageEndEvent {
            message_id,
            subagent_run_id,
            base,
        }),
        Stream::Tool { tool_call_id, .. } => Event::ToolCallEnd(ToolCallEndEvent {
            tool_call_id,
            subagent_run_id,
            base,
        }),
        Stream::Reasoning { message_id } => Event::ReasoningMessageEnd(ReasoningMessageEndEvent {
            message_id,
            subagent_run_id,
            base,
        }),
    }
}

/// The content event a chunk contributes to the stream `id` of `kind`.
fn content_event(
    kind: Kind,
    id: String,
    delta: String,
    subagent_run_id: Option<String>,
    base: BaseEvent,
) -> Event {
    match kind {
        Kind::Text => Event::TextMessageContent(TextMessageContentEvent {
            message_id: id,
            delta,
            subagent_run_id,
            base,
        }),
        Kind::Tool => Event::ToolCallArgs(ToolCallArgsEvent {
            tool_call_id: id,
            delta,
            subagent_run_id,
            base,
        }),
        Kind::Reasoning => Event::ReasoningMessageContent(ReasoningMessageContentEvent {
            message_id: id,
            delta,
            subagent_run_id,
            base,
        }),
    }
}

/// Rejects a continuation that repeats an opener field with a different value.
fn require_agreement(
    kind: Kind,
    id: &str,
    field: &str,
    incoming: Option<&str>,
    established: Option<&str>,
) -> Result<(), ChunkError> {
    let Some(incoming) = incoming else {
        return Ok(());
    };
    if Some(incoming) == established {
        return Ok(());
    }
    let mut message = format!(
        "Cannot continue {} '{id}': chunk {field} '{incoming}' does not match the open stream's {field} ",
        kind.entity()
    );
    match established {
        Some(established) => {
            let _ = write!(message, "'{established}'.");
        }
        None => message.push_str("(absent)."),
    }
    Err(ChunkError::new(message))
}

impl ChunkExpander {
    /// An expander with no stream in progress.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one event and appends what it expands to (zero or more events, in order) to `out`.
    /// Non-chunk events come out unchanged (possibly preceded by synthesized END events).
    pub fn push(&mut self, event: Event, out: &mut Vec<Event>) -> Result<(), ChunkError> {
        let chunk = match event {
            Event::TextMessageChunk(TextMessageChunkEvent {
                message_id,
                role,
                delta,
                name,
                subagent_run_id,
                base,
            }) => Chunk::new(
                Opener::Text { role, name },
                message_id,
                delta,
                subagent_run_id,
                base,
            ),
            Event::ToolCallChunk(ToolCallChunkEvent {
                tool_call_id,
                tool_call_name,
                parent_message_id,
                delta,
                subagent_run_id,
                base,
            }) => Chunk::new(
                Opener::Tool {
                    name: tool_call_name,
                    parent_message_id,
                },
                tool_call_id,
                delta,
                subagent_run_id,
                base,
            ),
            Event::ReasoningMessageChunk(ReasoningMessageChunkEvent {
                message_id,
                delta,
                subagent_run_id,
                base,
            }) => Chunk::new(Opener::Reasoning, message_id, delta, subagent_run_id, base),
            other => {
                self.close_for(&other, out);
                out.push(other);
                return Ok(());
            }
        };
        self.expand(chunk, out)
    }

    fn close_for(&mut self, event: &Event, out: &mut Vec<Event>) {
        if self.lanes.is_empty() {
            return;
        }
        match closes(event) {
            Closes::Nothing => {}
            Closes::Lane(owner) => {
                if let Some(index) = self.position(owner) {
                    out.push(end_event(self.lanes.remove(index)));
                }
            }
            Closes::All => out.extend(self.lanes.drain(..).map(end_event)),
        }
    }

    fn position(&self, owner: Option<&str>) -> Option<usize> {
        self.lanes.iter().position(|l| l.owner.as_deref() == owner)
    }

    /// Where a chunk of `kind` carrying `id` and `tag` belongs: the index of its
    /// lane, or `None` when that lane has nothing open.
    fn resolve(
        &self,
        kind: Kind,
        id: Option<&str>,
        tag: Option<&str>,
    ) -> Result<Option<usize>, ChunkError> {
        if let Some(id) = id {
            // An id already open continues there, whoever sends it; a tag naming
            // another lane contradicts that and is fatal here, because a chunk
            // with nothing to emit would never show the contradiction downstream.
            let Some(holder) = self.lanes.iter().position(|l| l.stream.holds(kind, id)) else {
                return Ok(self.position(tag));
            };
            let owner = self.lanes[holder].owner.as_deref();
            if let Some(tag) = tag
                && Some(tag) != owner
            {
                return Err(ChunkError::new(format!(
                    "Cannot continue {} '{id}': chunk subagentRunId '{tag}' does not match the open stream's subagent '{}'.",
                    kind.entity(),
                    owner.unwrap_or("(the parent agent)")
                )));
            }
            return Ok(Some(holder));
        }
        if tag.is_some() {
            return Ok(self.position(tag));
        }
        // Untagged reads as the parent agent first. Failing that, a producer that
        // tags only its opener still has exactly one stream this chunk can mean.
        let parent = self.position(None);
        if let Some(index) = parent
            && self.lanes[index].stream.kind() == kind
        {
            return Ok(Some(index));
        }
        let mut candidates = self
            .lanes
            .iter()
            .enumerate()
            .filter(|(_, l)| l.stream.kind() == kind);
        let Some((first, _)) = candidates.next() else {
            return Ok(parent);
        };
        let others = candidates.count();
        if others == 0 {
            return Ok(Some(first));
        }
        Err(ChunkError::new(format!(
            "Ambiguous {}: it carries neither a {} nor a subagentRunId, but {} lanes have an open {}. Attribute the chunk to the subagent it belongs to.",
            kind.chunk_type(),
            kind.id_field(),
            others + 1,
            kind.entity()
        )))
    }

    fn expand(&mut self, chunk: Chunk, out: &mut Vec<Event>) -> Result<(), ChunkError> {
        let kind = chunk.opener.kind();
        let lane = self.resolve(kind, chunk.id.as_deref(), chunk.tag.as_deref())?;
        let continuing = lane.filter(|&index| {
            let stream = &self.lanes[index].stream;
            stream.kind() == kind && chunk.id.as_deref().is_none_or(|id| id == stream.id())
        });
        match continuing {
            Some(index) => self.continue_stream(index, chunk, out),
            None => self.open_stream(lane, chunk, out),
        }
    }

    fn continue_stream(
        &self,
        index: usize,
        chunk: Chunk,
        out: &mut Vec<Event>,
    ) -> Result<(), ChunkError> {
        let lane = &self.lanes[index];
        let id = lane.stream.id();
        match (&chunk.opener, &lane.stream) {
            (
                Opener::Text { role, name },
                Stream::Text {
                    role: open_role,
                    name: open_name,
                    ..
                },
            ) => {
                require_agreement(
                    Kind::Text,
                    id,
                    "role",
                    role.map(TextMessageRole::as_str),
                    Some(open_role.as_str()),
                )?;
                require_agreement(
                    Kind::Text,
                    id,
                    "name",
                    name.as_deref(),
                    open_name.as_deref(),
                )?;
            }
            (
                Opener::Tool {
                    name,
                    parent_message_id,
                },
                Stream::Tool {
                    tool_call_name,
                    parent_message_id: open_parent,
                    ..
                },
            ) => {
                require_agreement(
                    Kind::Tool,
                    id,
                    "toolCallName",
                    name.as_deref(),
                    Some(tool_call_name),
                )?;
                require_agreement(
                    Kind::Tool,
                    id,
                    "parentMessageId",
                    parent_message_id.as_deref(),
                    open_parent.as_deref(),
                )?;
            }
            // Reasoning chunks repeat nothing; other pairings cannot continue.
            _ => {}
        }
        // A continuation that brings only metadata (a final chunk with usage, say)
        // still gets an empty content event, or the metadata would be lost.
        if chunk.delta.is_some() || chunk.raw_event.is_some() || chunk.metadata.is_some() {
            out.push(content_event(
                lane.stream.kind(),
                id.to_owned(),
                chunk.delta.unwrap_or_default(),
                lane.owner.clone(),
                BaseEvent {
                    timestamp: None,
                    raw_event: chunk.raw_event,
                    metadata: chunk.metadata,
                },
            ));
        }
        Ok(())
    }

    /// Opens a new stream in the chunk's lane, closing what that lane (at
    /// `lane`, if anything is open there) had in progress.
    fn open_stream(
        &mut self,
        lane: Option<usize>,
        chunk: Chunk,
        out: &mut Vec<Event>,
    ) -> Result<(), ChunkError> {
        let kind = chunk.opener.kind();
        // Every check comes before anything changes, so that a rejected chunk
        // leaves no trace.
        let Some(id) = chunk.id else {
            return Err(ChunkError::new(format!(
                "First {} must have a {}",
                kind.chunk_type(),
                kind.id_field()
            )));
        };
        // The opener gets the chunk's metadata but not its raw event: that rides
        // on the content event, which is what the producer actually sent.
        let has_content = chunk.delta.is_some() || chunk.raw_event.is_some();
        let (start_metadata, content_metadata) = if has_content {
            (chunk.metadata.clone(), chunk.metadata)
        } else {
            (chunk.metadata, None)
        };
        let start_base = BaseEvent {
            timestamp: None,
            raw_event: None,
            metadata: start_metadata,
        };
        let owner = chunk.tag;
        let (start, stream) = match chunk.opener {
            Opener::Text { role, name } => {
                // Absent means assistant; the reference writes it out explicitly.
                let role = role.unwrap_or(TextMessageRole::Assistant);
                let start = Event::TextMessageStart(TextMessageStartEvent {
                    message_id: id.clone(),
                    role: Some(role),
                    name: name.clone(),
                    subagent_run_id: owner.clone(),
                    base: start_base,
                });
                (
                    start,
                    Stream::Text {
                        message_id: id,
                        role,
                        name,
                    },
                )
            }
            Opener::Tool {
                name,
                parent_message_id,
            } => {
                let Some(tool_call_name) = name else {
                    return Err(ChunkError::new(
                        "First TOOL_CALL_CHUNK must have a toolCallName".to_owned(),
                    ));
                };
                let start = Event::ToolCallStart(ToolCallStartEvent {
                    tool_call_id: id.clone(),
                    tool_call_name: tool_call_name.clone(),
                    parent_message_id: parent_message_id.clone(),
                    subagent_run_id: owner.clone(),
                    base: start_base,
                });
                (
                    start,
                    Stream::Tool {
                        tool_call_id: id,
                        tool_call_name,
                        parent_message_id,
                    },
                )
            }
            Opener::Reasoning => {
                let start = Event::ReasoningMessageStart(ReasoningMessageStartEvent {
                    message_id: id.clone(),
                    role: ReasoningRole::Reasoning,
                    subagent_run_id: owner.clone(),
                    base: start_base,
                });
                (start, Stream::Reasoning { message_id: id })
            }
        };
        // Only now, with the chunk known to be good, does the lane's previous
        // stream end.
        if let Some(index) = lane {
            out.push(end_event(self.lanes.remove(index)));
        }
        out.push(start);
        if has_content {
            out.push(content_event(
                kind,
                stream.id().to_owned(),
                chunk.delta.unwrap_or_default(),
                owner.clone(),
                BaseEvent {
                    timestamp: None,
                    raw_event: chunk.raw_event,
                    metadata: content_metadata,
                },
            ));
        }
        self.lanes.push(Lane { owner, stream });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn event(value: Value) -> Event {
        let text = value.to_string();
        Event::from_value(value)
            .unwrap_or_else(|e| panic!("{text} does not decode: {e}"))
            .value
    }

    fn wire(event: &Event) -> Value {
        serde_json::to_value(event).expect("serializes")
    }

    /// Feeds `stream` in order; the expanded stream, or the first error and what
    /// came out before it.
    fn expand(stream: Vec<Value>) -> (Vec<Value>, Option<String>) {
        let mut expander = ChunkExpander::new();
        let mut out = Vec::new();
        for value in stream {
            if let Err(e) = expander.push(event(value), &mut out) {
                return (out.iter().map(wire).collect(), Some(e.message));
            }
        }
        (out.iter().map(wire).collect(), None)
    }

    fn expand_ok(stream: Vec<Value>) -> Vec<Value> {
        let (out, error) = expand(stream);
        assert_eq!(error, None, "unexpected error; expanded so far: {out:#?}");
        out
    }

    fn expand_err(stream: Vec<Value>) -> String {
        let (out, error) = expand(stream);
        error.unwrap_or_else(|| panic!("expected an error; expanded: {out:#?}"))
    }

    fn types(out: &[Value]) -> Vec<&str> {
        out.iter()
            .map(|e| e["type"].as_str().unwrap_or("?"))
            .collect()
    }

    fn run_started() -> Value {
        json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    }

    fn run_finished() -> Value {
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    }

    // --- the three kinds --------------------------------------------------

    #[test]
    fn text_chunks_expand_into_the_triad() {
        let out = expand_ok(vec![
            run_started(),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "Hello"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": " world"}),
            run_finished(),
        ]);
        assert_eq!(
            out,
            vec![
                run_started(),
                json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"}),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " world"}),
                json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
                run_finished(),
            ]
        );
    }

    #[test]
    fn text_opener_carries_explicit_role_and_name() {
        let out = expand_ok(vec![json!({
            "type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "user", "name": "ann"
        })]);
        assert_eq!(
            out,
            vec![json!({
                "type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "user", "name": "ann"
            })]
        );
    }

    #[test]
    fn tool_chunks_expand_into_the_triad() {
        let out = expand_ok(vec![
            json!({
                "type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "search",
                "parentMessageId": "m1", "delta": "{\"q\":"
            }),
            json!({"type": "TOOL_CALL_CHUNK", "delta": "1}"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "search"}),
            run_finished(),
        ]);
        assert_eq!(
            out,
            vec![
                json!({
                    "type": "TOOL_CALL_START", "toolCallId": "tc1", "toolCallName": "search",
                    "parentMessageId": "m1"
                }),
                json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": "{\"q\":"}),
                json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": "1}"}),
                json!({"type": "TOOL_CALL_END", "toolCallId": "tc1"}),
                run_finished(),
            ]
        );
    }

    #[test]
    fn tool_opener_without_parent_omits_it() {
        let out = expand_ok(vec![
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f"}),
        ]);
        assert_eq!(
            out,
            vec![json!({"type": "TOOL_CALL_START", "toolCallId": "tc1", "toolCallName": "f"})]
        );
    }

    #[test]
    fn reasoning_chunks_expand_with_the_reasoning_role() {
        let out = expand_ok(vec![
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": "Think"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "delta": "ing"}),
            json!({"type": "RUN_ERROR", "message": "boom"}),
        ]);
        assert_eq!(
            out,
            vec![
                json!({"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"}),
                json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "Think"}),
                json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "ing"}),
                json!({"type": "REASONING_MESSAGE_END", "messageId": "r1"}),
                json!({"type": "RUN_ERROR", "message": "boom"}),
            ]
        );
    }

    #[test]
    fn an_empty_delta_is_content_not_a_close() {
        let out = expand_ok(vec![
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": ""}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "delta": ""}),
        ]);
        assert_eq!(
            types(&out),
            [
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "REASONING_MESSAGE_CONTENT"
            ]
        );
    }

    #[test]
    fn an_empty_id_is_a_present_id() {
        let out = expand_ok(vec![
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": "a"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "", "delta": "b"}),
        ]);
        assert_eq!(
            out,
            vec![
                json!({"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"}),
                json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "a"}),
                json!({"type": "REASONING_MESSAGE_END", "messageId": "r1"}),
                json!({"type": "REASONING_MESSAGE_START", "messageId": "", "role": "reasoning"}),
                json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "", "delta": "b"}),
            ]
        );
    }

    #[test]
    fn the_stream_end_synthesizes_nothing() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f", "subagentRunId": "s"}),
        ]);
        assert_eq!(
            types(&out),
            [
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TOOL_CALL_START"
            ]
        );
    }

    // --- metadata, rawEvent, timestamp -------------------------------------

    #[test]
    fn opener_metadata_goes_on_start_and_content_raw_event_on_content_only() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m0"}),
            json!({
                "type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a",
                "timestamp": 5, "metadata": {"k": 1}, "rawEvent": {"p": true}
            }),
        ]);
        assert_eq!(
            out,
            vec![
                json!({"type": "TEXT_MESSAGE_START", "messageId": "m0"}),
                json!({
                    "type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant",
                    "metadata": {"k": 1}
                }),
                json!({
                    "type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a",
                    "metadata": {"k": 1}, "rawEvent": {"p": true}
                }),
            ]
        );
    }

    #[test]
    fn opener_with_only_a_raw_event_still_yields_content() {
        let out = expand_ok(vec![json!({
            "type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f",
            "rawEvent": "native"
        })]);
        assert_eq!(
            out,
            vec![
                json!({"type": "TOOL_CALL_START", "toolCallId": "tc1", "toolCallName": "f"}),
                json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": "", "rawEvent": "native"}),
            ]
        );
    }

    #[test]
    fn opener_with_only_metadata_yields_start_only() {
        let out = expand_ok(vec![json!({
            "type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "metadata": {"k": 1}
        })]);
        assert_eq!(
            out,
            vec![json!({
                "type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning",
                "metadata": {"k": 1}
            })]
        );
    }

    #[test]
    fn metadata_only_continuation_yields_an_empty_content_event() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "metadata": {"usage": 3}, "timestamp": 9}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f", "subagentRunId": "s"}),
            json!({"type": "TOOL_CALL_CHUNK", "metadata": {"finish": "stop"}}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "subagentRunId": "x"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "metadata": {}}),
        ]);
        assert_eq!(
            &out[2..3],
            [
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "", "metadata": {"usage": 3}})
            ]
        );
        assert_eq!(
            &out[4..5],
            [json!({
                "type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": "",
                "metadata": {"finish": "stop"}, "subagentRunId": "s"
            })]
        );
        assert_eq!(
            &out[6..],
            [json!({
                "type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "",
                "metadata": {}, "subagentRunId": "x"
            })]
        );
    }

    #[test]
    fn raw_event_only_continuation_yields_an_empty_content_event() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "rawEvent": [1], "metadata": {"a": null}}),
        ]);
        assert_eq!(
            out[1],
            json!({
                "type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "",
                "rawEvent": [1], "metadata": {"a": null}
            })
        );
    }

    #[test]
    fn an_empty_continuation_yields_nothing() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "timestamp": 1}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "role": "assistant"}),
        ]);
        assert_eq!(types(&out), ["TEXT_MESSAGE_START"]);
    }

    #[test]
    fn the_closing_end_never_takes_the_new_chunks_metadata() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "delta": "b", "metadata": {"k": 2}}),
        ]);
        assert_eq!(
            out[2..],
            [
                json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
                json!({"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant", "metadata": {"k": 2}}),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": "b", "metadata": {"k": 2}}),
            ]
        );
    }

    // --- what closes what --------------------------------------------------

    #[test]
    fn a_new_id_or_kind_in_the_same_lane_closes_the_previous_stream() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f", "delta": "{}"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc2", "toolCallName": "g"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "m1", "delta": "r"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "b"}),
        ]);
        assert_eq!(
            types(&out),
            [
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "TOOL_CALL_START",
                "TOOL_CALL_END",
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "REASONING_MESSAGE_END",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
            ]
        );
        assert_eq!(
            out[5],
            json!({"type": "TOOL_CALL_END", "toolCallId": "tc1"})
        );
    }

    #[test]
    fn raw_and_other_asides_do_not_close() {
        let asides = [
            json!({"type": "RAW", "event": {"x": 1}}),
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "a1", "activityType": "plan", "content": {}}),
            json!({"type": "ACTIVITY_DELTA", "messageId": "a1", "activityType": "plan", "patch": []}),
            json!({
                "type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "m1",
                "encryptedValue": "xyz"
            }),
            json!({"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "n"}),
            json!({"type": "SOMETHING_FROM_THE_FUTURE", "x": 1}),
        ];
        for aside in asides {
            let out = expand_ok(vec![
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
                aside.clone(),
                json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "b"}),
            ]);
            assert_eq!(out[2], aside, "passes through unchanged");
            assert_eq!(
                out[3],
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"}),
                "{aside} must not close the stream"
            );
            assert_eq!(out.len(), 4);
        }
    }

    #[test]
    fn explicit_events_close_their_own_lane() {
        let closers = [
            json!({"type": "CUSTOM", "name": "n", "value": null}),
            json!({"type": "STEP_STARTED", "stepName": "s"}),
            json!({"type": "STEP_FINISHED", "stepName": "s"}),
            json!({"type": "STATE_SNAPSHOT", "snapshot": {}}),
            json!({"type": "STATE_DELTA", "delta": []}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "x"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "x", "delta": "d"}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "x"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "x", "toolCallName": "f"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "x", "delta": "d"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "x"}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "y", "content": "c"}),
            json!({"type": "REASONING_START", "messageId": "x"}),
            json!({"type": "REASONING_MESSAGE_START", "messageId": "x", "role": "reasoning"}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "x", "delta": "d"}),
            json!({"type": "REASONING_MESSAGE_END", "messageId": "x"}),
            json!({"type": "REASONING_END", "messageId": "x"}),
        ];
        for closer in closers {
            let out = expand_ok(vec![
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "delta": "b", "subagentRunId": "s"}),
                closer.clone(),
            ]);
            assert_eq!(
                out[4..],
                [
                    json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
                    closer.clone()
                ],
                "{closer} closes the parent lane only"
            );

            let mut tagged = closer.clone();
            tagged["subagentRunId"] = json!("s");
            let out = expand_ok(vec![
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "delta": "b", "subagentRunId": "s"}),
                tagged.clone(),
            ]);
            assert_eq!(
                out[4..],
                [
                    json!({"type": "TEXT_MESSAGE_END", "messageId": "m2", "subagentRunId": "s"}),
                    tagged
                ],
                "{closer} tagged closes the subagent lane only"
            );
        }
    }

    #[test]
    fn custom_closes_so_an_idless_continuation_is_fatal() {
        let error = expand_err(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
            json!({"type": "CUSTOM", "name": "n", "value": 1}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "b"}),
        ]);
        assert_eq!(error, "First TEXT_MESSAGE_CHUNK must have a messageId");
    }

    #[test]
    fn run_level_events_close_every_lane_in_opening_order() {
        for terminal in [
            run_started(),
            run_finished(),
            json!({"type": "RUN_ERROR", "message": "m"}),
            json!({"type": "MESSAGES_SNAPSHOT", "messages": []}),
        ] {
            let out = expand_ok(vec![
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
                json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "b", "toolCallName": "f"}),
                json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "c", "subagentRunId": "s2"}),
                // Reopening a lane moves it to the back of the closing order.
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "d", "subagentRunId": "s1"}),
                // Continuing does not.
                json!({"type": "TOOL_CALL_CHUNK", "delta": "x"}),
                terminal.clone(),
            ]);
            assert_eq!(
                out[6..],
                [
                    json!({"type": "TOOL_CALL_END", "toolCallId": "b"}),
                    json!({"type": "REASONING_MESSAGE_END", "messageId": "c", "subagentRunId": "s2"}),
                    json!({"type": "TEXT_MESSAGE_END", "messageId": "d", "subagentRunId": "s1"}),
                    terminal.clone(),
                ]
            );
            // Closed means closed: nothing more for a second terminal.
            let mut expander = ChunkExpander::new();
            let mut out = Vec::new();
            expander
                .push(
                    event(json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m"})),
                    &mut out,
                )
                .expect("opens");
            expander
                .push(event(terminal.clone()), &mut out)
                .expect("closes");
            expander
                .push(event(terminal.clone()), &mut out)
                .expect("passes");
            assert_eq!(out.len(), 4);
        }
    }

    #[test]
    fn subagent_terminals_close_their_own_lane_only() {
        for terminal in [
            json!({"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"}),
            json!({"type": "SUBAGENT_ERROR", "subagentRunId": "s1", "message": "m"}),
        ] {
            let out = expand_ok(vec![
                json!({"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "n"}),
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "p", "delta": "parent"}),
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "half ", "subagentRunId": "s1"}),
                json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "done", "subagentRunId": "s1"}),
                terminal.clone(),
                json!({"type": "TEXT_MESSAGE_CHUNK", "delta": " more"}),
            ]);
            assert_eq!(
                out[3..],
                [
                    json!({
                        "type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant",
                        "subagentRunId": "s1"
                    }),
                    json!({
                        "type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "half ",
                        "subagentRunId": "s1"
                    }),
                    json!({
                        "type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "done",
                        "subagentRunId": "s1"
                    }),
                    json!({"type": "TEXT_MESSAGE_END", "messageId": "m1", "subagentRunId": "s1"}),
                    terminal.clone(),
                    json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "p", "delta": " more"}),
                ]
            );
        }
    }

    #[test]
    fn a_non_chunk_event_with_nothing_open_passes_through_unchanged() {
        let value = json!({
            "type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "y", "content": "c",
            "timestamp": 1, "metadata": {"m": 1}, "rawEvent": 0
        });
        assert_eq!(expand_ok(vec![value.clone()]), vec![value]);
    }

    // --- lanes ---------------------------------------------------------------

    #[test]
    fn concurrent_subagents_assemble_independently() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "delta": "1", "subagentRunId": "s1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "b", "delta": "2", "subagentRunId": "s2"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "3", "subagentRunId": "s1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "4", "subagentRunId": "s2"}),
            // An id already open continues in its own lane even when untagged, and
            // what is emitted is attributed to that lane.
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "delta": "5"}),
        ]);
        assert_eq!(
            out[4..],
            [
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "3", "subagentRunId": "s1"}),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "b", "delta": "4", "subagentRunId": "s2"}),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "5", "subagentRunId": "s1"}),
            ]
        );
    }

    #[test]
    fn an_untagged_continuation_prefers_the_parent() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "p"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
        ]);
        assert_eq!(
            out[2],
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "p", "delta": "x"})
        );
    }

    #[test]
    fn an_untagged_continuation_falls_back_to_the_sole_open_stream() {
        // The parent has a tool call in flight; the only open text is s1's.
        let out = expand_ok(vec![
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t", "toolCallName": "f"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r", "subagentRunId": "s2"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
        ]);
        assert_eq!(
            out[3..],
            [
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "x", "subagentRunId": "s1"})
            ]
        );
    }

    #[test]
    fn a_tagged_idless_chunk_in_a_lane_with_nothing_of_its_kind_is_a_first_chunk() {
        let error = expand_err(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x", "subagentRunId": "s1"}),
        ]);
        assert_eq!(error, "First TEXT_MESSAGE_CHUNK must have a messageId");
    }

    #[test]
    fn ambiguous_continuations_are_fatal() {
        let error = expand_err(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "b", "subagentRunId": "s2"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
        ]);
        assert_eq!(
            error,
            "Ambiguous TEXT_MESSAGE_CHUNK: it carries neither a messageId nor a subagentRunId, but 2 lanes have an open text message. Attribute the chunk to the subagent it belongs to."
        );
        let error = expand_err(vec![
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "a", "toolCallName": "f", "subagentRunId": "s1"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "b", "toolCallName": "f", "subagentRunId": "s2"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "f", "subagentRunId": "s3"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "p"}),
            json!({"type": "TOOL_CALL_CHUNK", "delta": "x"}),
        ]);
        assert_eq!(
            error,
            "Ambiguous TOOL_CALL_CHUNK: it carries neither a toolCallId nor a subagentRunId, but 3 lanes have an open tool call. Attribute the chunk to the subagent it belongs to."
        );
        let error = expand_err(vec![
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "b", "subagentRunId": "s2"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "metadata": {}}),
        ]);
        assert_eq!(
            error,
            "Ambiguous REASONING_MESSAGE_CHUNK: it carries neither a messageId nor a subagentRunId, but 2 lanes have an open reasoning message. Attribute the chunk to the subagent it belongs to."
        );
    }

    #[test]
    fn owner_conflicts_are_fatal() {
        let error = expand_err(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "subagentRunId": "s1"}),
        ]);
        assert_eq!(
            error,
            "Cannot continue text message 'm1': chunk subagentRunId 's1' does not match the open stream's subagent '(the parent agent)'."
        );
        let error = expand_err(vec![
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "f", "subagentRunId": "s1"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "subagentRunId": "s2", "delta": "x"}),
        ]);
        assert_eq!(
            error,
            "Cannot continue tool call 't1': chunk subagentRunId 's2' does not match the open stream's subagent 's1'."
        );
        let error = expand_err(vec![
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "subagentRunId": "s1"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "subagentRunId": "s2"}),
        ]);
        assert_eq!(
            error,
            "Cannot continue reasoning message 'r1': chunk subagentRunId 's2' does not match the open stream's subagent 's1'."
        );
    }

    // --- first chunks and opener agreement -------------------------------------

    #[test]
    fn first_chunks_need_their_ids() {
        let cases = [
            (
                json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
                "First TEXT_MESSAGE_CHUNK must have a messageId",
            ),
            (
                json!({"type": "TOOL_CALL_CHUNK", "toolCallName": "f", "delta": "x"}),
                "First TOOL_CALL_CHUNK must have a toolCallId",
            ),
            (
                json!({"type": "TOOL_CALL_CHUNK"}),
                "First TOOL_CALL_CHUNK must have a toolCallId",
            ),
            (
                json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "delta": "x"}),
                "First TOOL_CALL_CHUNK must have a toolCallName",
            ),
            (
                json!({"type": "REASONING_MESSAGE_CHUNK", "delta": "x"}),
                "First REASONING_MESSAGE_CHUNK must have a messageId",
            ),
        ];
        for (chunk, message) in cases {
            assert_eq!(expand_err(vec![chunk]), message);
        }
        // Also when another kind is open in the lane.
        let error = expand_err(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "delta": "x"}),
        ]);
        assert_eq!(error, "First TOOL_CALL_CHUNK must have a toolCallName");
    }

    #[test]
    fn conflicting_text_opener_fields_are_fatal() {
        let cases = [
            (
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "user"}),
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant"}),
                "Cannot continue text message 'm1': chunk role 'assistant' does not match the open stream's role 'user'.",
            ),
            (
                // The defaulted role is established too.
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
                json!({"type": "TEXT_MESSAGE_CHUNK", "role": "user"}),
                "Cannot continue text message 'm1': chunk role 'user' does not match the open stream's role 'assistant'.",
            ),
            (
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
                json!({"type": "TEXT_MESSAGE_CHUNK", "name": "bob"}),
                "Cannot continue text message 'm1': chunk name 'bob' does not match the open stream's name (absent).",
            ),
            (
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "name": "ann"}),
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "name": "bob", "role": "assistant"}),
                "Cannot continue text message 'm1': chunk name 'bob' does not match the open stream's name 'ann'.",
            ),
        ];
        for (opener, continuation, message) in cases {
            assert_eq!(expand_err(vec![opener, continuation]), message);
        }
    }

    #[test]
    fn conflicting_tool_opener_fields_are_fatal() {
        let cases = [
            (
                json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "search"}),
                json!({"type": "TOOL_CALL_CHUNK", "toolCallName": "delete"}),
                "Cannot continue tool call 't1': chunk toolCallName 'delete' does not match the open stream's toolCallName 'search'.",
            ),
            (
                json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "f"}),
                json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "parentMessageId": "m9"}),
                "Cannot continue tool call 't1': chunk parentMessageId 'm9' does not match the open stream's parentMessageId (absent).",
            ),
            (
                json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "f", "parentMessageId": "m1"}),
                json!({"type": "TOOL_CALL_CHUNK", "toolCallName": "f", "parentMessageId": "m2"}),
                "Cannot continue tool call 't1': chunk parentMessageId 'm2' does not match the open stream's parentMessageId 'm1'.",
            ),
        ];
        for (opener, continuation, message) in cases {
            assert_eq!(expand_err(vec![opener, continuation]), message);
        }
    }

    #[test]
    fn agreeing_repeats_are_accepted() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "name": "ann"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant", "name": "ann", "delta": "x"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "f", "parentMessageId": "m1"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallName": "f", "parentMessageId": "m1", "delta": "{}"}),
        ]);
        assert_eq!(
            types(&out),
            [
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS"
            ]
        );
    }

    #[test]
    fn opener_fields_on_a_new_id_open_rather_than_conflict() {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "user"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "role": "assistant"}),
        ]);
        assert_eq!(
            out,
            vec![
                json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "user"}),
                json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
                json!({"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"}),
            ]
        );
    }

    #[test]
    fn a_rejected_chunk_emits_nothing_and_changes_nothing() {
        let mut expander = ChunkExpander::new();
        let mut out = Vec::new();
        expander
            .push(
                event(json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"})),
                &mut out,
            )
            .expect("opens");
        let before = out.len();
        for bad in [
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "delta": "x"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "role": "user", "delta": "x"}),
        ] {
            let error = expander.push(event(bad), &mut out);
            assert!(error.is_err());
            assert_eq!(out.len(), before);
        }
        expander
            .push(
                event(json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "b"})),
                &mut out,
            )
            .expect("the message is still open");
        assert_eq!(
            wire(&out[before]),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"})
        );
    }

    #[test]
    fn chunk_error_displays_its_message() {
        let error = ChunkError::new("x y".to_owned());
        assert_eq!(error.to_string(), "x y");
        let error: crate::Error = error.into();
        assert_eq!(error.to_string(), "x y");
    }
}
