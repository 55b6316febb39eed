//! What the model takes from the references rather than from agwire: the
//! event types and message roles enforcement knows, and the chunk families.

pub(super) const KNOWN_TYPES: &[&str] = &[
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TEXT_MESSAGE_CHUNK",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_CHUNK",
    "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT",
    "STATE_DELTA",
    "MESSAGES_SNAPSHOT",
    "ACTIVITY_SNAPSHOT",
    "ACTIVITY_DELTA",
    "RAW",
    "CUSTOM",
    "RUN_STARTED",
    "RUN_FINISHED",
    "RUN_ERROR",
    "STEP_STARTED",
    "STEP_FINISHED",
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_MESSAGE_CHUNK",
    "REASONING_END",
    "REASONING_ENCRYPTED_VALUE",
    "SUBAGENT_STARTED",
    "SUBAGENT_FINISHED",
    "SUBAGENT_ERROR",
];

/// The message roles enforcement keeps: the `role` constants of the 1.1
/// schema's message definitions (`DeveloperMessage` … `ReasoningMessage`).
/// The model's own list, not agwire-core's `Role`: an oracle that asked the
/// code it judges which roles exist would agree with it by construction.
pub(super) const KNOWN_ROLES: &[&str] = &[
    "developer",
    "system",
    "assistant",
    "user",
    "tool",
    "activity",
    "reasoning",
];

/// The three kinds of stream `transformChunks` assembles from chunks
/// (`PendingStream["kind"]`: `"text" | "tool" | "reasoning"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Text,
    Tool,
    Reasoning,
}

/// What the model knows of one [`Kind`], as data rather than code: the
/// official event type names of its family, and the words the client's
/// messages use for it.
///
/// An oracle must not share the code it judges, nor repeat it: a copy of
/// agwire-core's own chunk helpers (whose `Kind` is private, and rightly so)
/// would agree with them by construction, typo for typo, and the differential
/// test compares agwire's chunk errors with what this model predicts. So the
/// rows below are taken from the references themselves — the event type names
/// from AG-UI's `EventType` (and [`KNOWN_TYPES`], which a test holds them to),
/// the id field and the entity words from `@ag-ui/client` 1.0.0's
/// `src/chunks/transform.ts` (`missingIdFieldName`, and the `entityKind`
/// argument of its error messages) — and the model reads them from one table.
#[derive(Debug)]
pub(super) struct Family {
    pub(super) kind: Kind,
    /// The chunk event, and the start/content/end events it abbreviates.
    pub(super) chunk: &'static str,
    pub(super) start: &'static str,
    pub(super) content: &'static str,
    pub(super) end: &'static str,
    /// The field a chunk names its stream by.
    pub(super) id_field: &'static str,
    /// How the client's error messages name the stream.
    pub(super) entity: &'static str,
}

/// One row per [`Kind`].
pub(super) const FAMILIES: [Family; 3] = [
    Family {
        kind: Kind::Text,
        chunk: "TEXT_MESSAGE_CHUNK",
        start: "TEXT_MESSAGE_START",
        content: "TEXT_MESSAGE_CONTENT",
        end: "TEXT_MESSAGE_END",
        id_field: "messageId",
        entity: "text message",
    },
    Family {
        kind: Kind::Tool,
        chunk: "TOOL_CALL_CHUNK",
        start: "TOOL_CALL_START",
        content: "TOOL_CALL_ARGS",
        end: "TOOL_CALL_END",
        id_field: "toolCallId",
        entity: "tool call",
    },
    Family {
        kind: Kind::Reasoning,
        chunk: "REASONING_MESSAGE_CHUNK",
        start: "REASONING_MESSAGE_START",
        content: "REASONING_MESSAGE_CONTENT",
        end: "REASONING_MESSAGE_END",
        id_field: "messageId",
        entity: "reasoning message",
    },
];

impl Kind {
    /// Its row of [`FAMILIES`].
    pub(super) fn family(self) -> &'static Family {
        FAMILIES
            .iter()
            .find(|f| f.kind == self)
            .expect("a row per kind")
    }
}
