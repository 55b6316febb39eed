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
mod tests;
