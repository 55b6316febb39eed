//! The 31 AG-UI 1.1 events.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::Metadata;
use crate::content::Content;
use crate::decode::{
    AnyJson, Cx, DResult, Decode, DecodeError, DecodeMode, Decoded, NonNullJson, Obj, Path,
    Timestamp, top,
};
use crate::input::RunAgentInput;
use crate::message::Message;
use crate::outcome::{RunFinishedOutcome, SubagentFinishedOutcome};
use crate::patch::PatchOperation;
use crate::usage::TokenUsage;
use crate::version::ProtocolVersion;

macro_rules! event_types {
    ($($variant:ident = $name:literal),* $(,)?) => {
        /// The `type` discriminator of every event the protocol describes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum EventType {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl EventType {
            /// Every event type, in schema order.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant),*];

            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $name,)*
                }
            }
        }

        impl FromStr for EventType {
            type Err = ();

            fn from_str(s: &str) -> Result<Self, ()> {
                match s {
                    $($name => Ok(EventType::$variant),)*
                    _ => Err(()),
                }
            }
        }
    };
}

event_types! {
    TextMessageStart = "TEXT_MESSAGE_START",
    TextMessageContent = "TEXT_MESSAGE_CONTENT",
    TextMessageEnd = "TEXT_MESSAGE_END",
    TextMessageChunk = "TEXT_MESSAGE_CHUNK",
    ToolCallStart = "TOOL_CALL_START",
    ToolCallArgs = "TOOL_CALL_ARGS",
    ToolCallEnd = "TOOL_CALL_END",
    ToolCallChunk = "TOOL_CALL_CHUNK",
    ToolCallResult = "TOOL_CALL_RESULT",
    StateSnapshot = "STATE_SNAPSHOT",
    StateDelta = "STATE_DELTA",
    MessagesSnapshot = "MESSAGES_SNAPSHOT",
    ActivitySnapshot = "ACTIVITY_SNAPSHOT",
    ActivityDelta = "ACTIVITY_DELTA",
    Raw = "RAW",
    Custom = "CUSTOM",
    RunStarted = "RUN_STARTED",
    RunFinished = "RUN_FINISHED",
    RunError = "RUN_ERROR",
    StepStarted = "STEP_STARTED",
    StepFinished = "STEP_FINISHED",
    ReasoningStart = "REASONING_START",
    ReasoningMessageStart = "REASONING_MESSAGE_START",
    ReasoningMessageContent = "REASONING_MESSAGE_CONTENT",
    ReasoningMessageEnd = "REASONING_MESSAGE_END",
    ReasoningMessageChunk = "REASONING_MESSAGE_CHUNK",
    ReasoningEnd = "REASONING_END",
    ReasoningEncryptedValue = "REASONING_ENCRYPTED_VALUE",
    SubagentStarted = "SUBAGENT_STARTED",
    SubagentFinished = "SUBAGENT_FINISHED",
    SubagentError = "SUBAGENT_ERROR",
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The envelope every event carries (`#[non_exhaustive]`: start from
/// `BaseEvent::default()` and set its fields).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct BaseEvent {
    /// Integer, conventionally milliseconds since the epoch; never used for ordering.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// The provider-native event this one came from (never a bare `null`).
    /// Boxed, like `metadata`: both are rare, and every event carries the
    /// envelope, so keeping it small keeps every event cheap to move.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_event: Option<Box<Value>>,
    /// Open metadata; key `"ag-ui"` is reserved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Box<Metadata>>,
}

/// The role of a text message (`TEXT_MESSAGE_START.role`); `tool` is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TextMessageRole {
    /// Developer.
    Developer,
    /// System.
    System,
    /// Assistant (the default when absent).
    #[default]
    Assistant,
    /// User.
    User,
}

impl TextMessageRole {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TextMessageRole::Developer => "developer",
            TextMessageRole::System => "system",
            TextMessageRole::Assistant => "assistant",
            TextMessageRole::User => "user",
        }
    }
}

/// The constant `role: "tool"` of `TOOL_CALL_RESULT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ToolRole {
    /// `"tool"`.
    #[default]
    Tool,
}

/// The constant `role: "reasoning"` of `REASONING_MESSAGE_START`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningRole {
    /// `"reasoning"`.
    #[default]
    Reasoning,
}

/// What a `REASONING_ENCRYPTED_VALUE` is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EncryptedValueSubtype {
    /// A tool call (`entityId` is its id).
    ToolCall,
    /// A message (`entityId` is its id).
    Message,
}

/// Declares one event struct: its fields (the required ones, then the
/// optional ones), envelope and `subagentRunId`, `#[non_exhaustive]` so the
/// protocol can add a field in a minor release, with a constructor taking
/// the required fields and a setter for each optional one.
macro_rules! event_struct {
    // An event a subagent may emit: it carries an optional `subagentRunId`.
    (
        $(#[$doc:meta])* $name:ident attr $required:tt optional $optional:tt
    ) => {
        event_struct!(@define $(#[$doc])* $name $required optional $optional
            extra_fields {
                /// The subagent that emitted this event; absent means the parent agent.
                #[serde(skip_serializing_if = "Option::is_none")]
                pub subagent_run_id: Option<String>,
            }
            extra_init { subagent_run_id: None, }
            extra_methods {
                /// Attributes the event to a subagent invocation.
                #[must_use]
                pub fn subagent_run_id(mut self, id: impl Into<String>) -> Self {
                    self.subagent_run_id = Some(id.into());
                    self
                }

                /// Attributes the event to a subagent invocation, or to the
                /// parent agent (`None`).
                #[must_use]
                pub fn attributed_to(mut self, subagent_run_id: Option<String>) -> Self {
                    self.subagent_run_id = subagent_run_id;
                    self
                }
            }
        );
    };
    (
        $(#[$doc:meta])* $name:ident $required:tt optional $optional:tt
    ) => {
        event_struct!(@define $(#[$doc])* $name $required optional $optional
            extra_fields {} extra_init {} extra_methods {}
        );
    };
    (
        @define $(#[$doc:meta])* $name:ident
        { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }
        optional { $($(#[$odoc:meta])* $ofield:ident : $oty:ty),* $(,)? }
        extra_fields { $($extra_fields:tt)* }
        extra_init { $($extra_init:tt)* }
        extra_methods { $($extra_methods:tt)* }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(rename_all = "camelCase")]
        #[non_exhaustive]
        pub struct $name {
            $(
                $(#[$fdoc])*
                pub $field: $ty,
            )*
            $(
                $(#[$odoc])*
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $ofield: Option<$oty>,
            )*
            $($extra_fields)*
            /// The envelope.
            #[serde(flatten)]
            pub base: BaseEvent,
        }

        #[allow(clippy::new_without_default)]
        impl $name {
            /// The event with its required fields; the optional ones absent.
            pub fn new($($field: impl Into<$ty>),*) -> Self {
                Self {
                    $($field: $field.into(),)*
                    $($ofield: None,)*
                    $($extra_init)*
                    base: BaseEvent::default(),
                }
            }

            $(
                #[doc = concat!("Sets `", stringify!($ofield), "`.")]
                #[must_use]
                pub fn $ofield(mut self, value: impl Into<$oty>) -> Self {
                    self.$ofield = Some(value.into());
                    self
                }
            )*

            $($extra_methods)*

            /// Sets the envelope.
            #[must_use]
            pub fn base(mut self, base: BaseEvent) -> Self {
                self.base = base;
                self
            }
        }
    };
}

event_struct!(
    /// Opens a text message.
    TextMessageStartEvent attr {
        /// Message id.
        message_id: String,
    } optional {
        /// Absent means assistant.
        role: TextMessageRole,
        /// Speaker label.
        name: String,
    }
);

event_struct!(
    /// Appends text to an open message (the delta may be empty).
    TextMessageContentEvent attr {
        /// Message id.
        message_id: String,
        /// Text to append.
        delta: String,
    } optional {
    }
);

event_struct!(
    /// Closes a text message.
    TextMessageEndEvent attr {
        /// Message id.
        message_id: String,
    } optional {
    }
);

event_struct!(
    /// Compact form of start/content/end; expanded before verification.
    TextMessageChunkEvent attr {
    } optional {
        /// Message id (required on the first chunk).
        message_id: String,
        /// Role (first chunk).
        role: TextMessageRole,
        /// Text to append.
        delta: String,
        /// Speaker label.
        name: String,
    }
);

event_struct!(
    /// Opens a tool call.
    ToolCallStartEvent attr {
        /// Tool call id.
        tool_call_id: String,
        /// Tool name.
        tool_call_name: String,
    } optional {
        /// The assistant message that carries the call.
        parent_message_id: String,
    }
);

event_struct!(
    /// Appends argument text to an open tool call.
    ToolCallArgsEvent attr {
        /// Tool call id.
        tool_call_id: String,
        /// Argument text fragment.
        delta: String,
    } optional {
    }
);

event_struct!(
    /// Closes a tool call (its argument text is complete).
    ToolCallEndEvent attr {
        /// Tool call id.
        tool_call_id: String,
    } optional {
    }
);

event_struct!(
    /// Compact form of tool-call start/args/end.
    ToolCallChunkEvent attr {
    } optional {
        /// Tool call id (required on the first chunk).
        tool_call_id: String,
        /// Tool name (required on the first chunk).
        tool_call_name: String,
        /// The assistant message that carries the call.
        parent_message_id: String,
        /// Argument text fragment.
        delta: String,
    }
);

event_struct!(
    /// The result of a tool call; mints a tool message.
    ToolCallResultEvent attr {
        /// Id of the tool message it mints.
        message_id: String,
        /// The call answered.
        tool_call_id: String,
        /// Text or parts.
        content: Content,
    } optional {
        /// Constant `"tool"`.
        role: ToolRole,
    }
);

event_struct!(
    /// Replaces the whole state (any JSON, `null` included).
    StateSnapshotEvent attr {
        /// The new state.
        snapshot: Value,
    } optional {
    }
);

event_struct!(
    /// Patches the state atomically.
    StateDeltaEvent attr {
        /// RFC 6902 operations.
        delta: Vec<PatchOperation>,
    } optional {
    }
);

event_struct!(
    /// The complete set of messages the producer owns.
    MessagesSnapshotEvent {
        /// The messages, in order.
        messages: Vec<Message>,
    } optional {
    }
);

event_struct!(
    /// Creates or replaces an activity message.
    ActivitySnapshotEvent attr {
        /// Activity message id.
        message_id: String,
        /// Open activity kind.
        activity_type: String,
        /// The activity's structured content.
        content: Map<String, Value>,
    } optional {
        /// Absent means `true`.
        replace: bool,
    }
);

event_struct!(
    /// Patches an activity message's content.
    ActivityDeltaEvent attr {
        /// Activity message id.
        message_id: String,
        /// Activity kind (replaces the message's).
        activity_type: String,
        /// RFC 6902 operations on the content.
        patch: Vec<PatchOperation>,
    } optional {
    }
);

event_struct!(
    /// A provider-native event passed through.
    RawEvent attr {
        /// The native event (any JSON, `null` included).
        event: Value,
    } optional {
        /// Where it came from.
        source: String,
    }
);

event_struct!(
    /// An application-defined event; unknown names are ignored.
    CustomEvent attr {
        /// Event name (unprefixed names are reserved).
        name: String,
        /// Payload (any JSON, `null` included).
        value: Value,
    } optional {
    }
);

event_struct!(
    /// Starts a run.
    RunStartedEvent {
        /// Thread id.
        thread_id: String,
        /// Run id.
        run_id: String,
    } optional {
        /// The run that spawned this one.
        parent_run_id: String,
        /// The producer's protocol version.
        protocol_version: String,
        /// Echo of the request.
        input: Box<RunAgentInput>,
    }
);

event_struct!(
    /// Ends a run.
    RunFinishedEvent {
        /// Thread id.
        thread_id: String,
        /// Run id.
        run_id: String,
    } optional {
        /// The run's return value (never a bare `null`).
        result: Value,
        /// Absent means success.
        outcome: RunFinishedOutcome,
        /// Token usage per (provider, model).
        usage: Vec<TokenUsage>,
    }
);

event_struct!(
    /// The run failed.
    RunErrorEvent {
        /// Human-readable message.
        message: String,
    } optional {
        /// Open error code (`abort` for a client abort).
        code: String,
        /// Partial usage.
        usage: Vec<TokenUsage>,
    }
);

event_struct!(
    /// Starts a named step.
    StepStartedEvent attr {
        /// Step name.
        step_name: String,
    } optional {
    }
);

event_struct!(
    /// Finishes a named step.
    StepFinishedEvent attr {
        /// Step name.
        step_name: String,
    } optional {
    }
);

event_struct!(
    /// Opens a reasoning span.
    ReasoningStartEvent attr {
        /// Span id (its own namespace, apart from reasoning messages).
        message_id: String,
    } optional {
    }
);

event_struct!(
    /// Opens a reasoning message.
    ReasoningMessageStartEvent attr {
        /// Reasoning message id.
        message_id: String,
        /// Constant `"reasoning"`.
        role: ReasoningRole,
    } optional {
    }
);

event_struct!(
    /// Appends reasoning text.
    ReasoningMessageContentEvent attr {
        /// Reasoning message id.
        message_id: String,
        /// Text to append.
        delta: String,
    } optional {
    }
);

event_struct!(
    /// Closes a reasoning message.
    ReasoningMessageEndEvent attr {
        /// Reasoning message id.
        message_id: String,
    } optional {
    }
);

event_struct!(
    /// Compact form of reasoning start/content/end.
    ReasoningMessageChunkEvent attr {
    } optional {
        /// Reasoning message id (required on the first chunk).
        message_id: String,
        /// Text to append.
        delta: String,
    }
);

event_struct!(
    /// Closes a reasoning span.
    ReasoningEndEvent attr {
        /// Span id.
        message_id: String,
    } optional {
    }
);

event_struct!(
    /// Attaches provider-encrypted reasoning to a message or tool call.
    ReasoningEncryptedValueEvent attr {
        /// What `entity_id` names.
        subtype: EncryptedValueSubtype,
        /// The message or tool call id.
        entity_id: String,
        /// The opaque payload.
        encrypted_value: String,
    } optional {
        /// What the payload is (1.1; never sent without `encrypted_value`).
        encrypted_value_type: String,
    }
);

event_struct!(
    /// A subagent invocation starts.
    SubagentStartedEvent {
        /// This invocation.
        subagent_run_id: String,
        /// Subagent name.
        name: String,
    } optional {
        /// Description.
        description: String,
        /// The subagent that started this one.
        parent_subagent_run_id: String,
        /// The tool call that started it.
        parent_tool_call_id: String,
        /// The message that started it.
        parent_message_id: String,
    }
);

event_struct!(
    /// A subagent invocation finished.
    SubagentFinishedEvent {
        /// The invocation.
        subagent_run_id: String,
    } optional {
        /// Its return value (never a bare `null`).
        result: Value,
        /// Success or suspended.
        outcome: SubagentFinishedOutcome,
    }
);

event_struct!(
    /// A subagent invocation failed.
    SubagentErrorEvent {
        /// The invocation.
        subagent_run_id: String,
        /// Human-readable message.
        message: String,
    } optional {
        /// Open error code.
        code: String,
    }
);

/// An event whose `type` the protocol does not describe, kept whole so that a
/// translator can still handle it; the client pipeline drops it with a warning.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownEvent {
    /// The `type` string (empty when the event had none).
    pub event_type: String,
    /// The event as received.
    pub value: Value,
}

impl Serialize for UnknownEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(serializer)
    }
}

/// One AG-UI event.
///
/// `#[non_exhaustive]`: the protocol adds event types in minor releases, so
/// a `match` outside this crate has a `_` arm (an event type a consumer
/// does not handle is one it may ignore, as [`Event::Unknown`] is).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
#[non_exhaustive]
pub enum Event {
    TextMessageStart(TextMessageStartEvent),
    TextMessageContent(TextMessageContentEvent),
    TextMessageEnd(TextMessageEndEvent),
    TextMessageChunk(TextMessageChunkEvent),
    ToolCallStart(ToolCallStartEvent),
    ToolCallArgs(ToolCallArgsEvent),
    ToolCallEnd(ToolCallEndEvent),
    ToolCallChunk(ToolCallChunkEvent),
    ToolCallResult(ToolCallResultEvent),
    StateSnapshot(StateSnapshotEvent),
    StateDelta(StateDeltaEvent),
    MessagesSnapshot(MessagesSnapshotEvent),
    ActivitySnapshot(ActivitySnapshotEvent),
    ActivityDelta(ActivityDeltaEvent),
    Raw(RawEvent),
    Custom(CustomEvent),
    RunStarted(RunStartedEvent),
    RunFinished(RunFinishedEvent),
    RunError(RunErrorEvent),
    StepStarted(StepStartedEvent),
    StepFinished(StepFinishedEvent),
    ReasoningStart(ReasoningStartEvent),
    ReasoningMessageStart(ReasoningMessageStartEvent),
    ReasoningMessageContent(ReasoningMessageContentEvent),
    ReasoningMessageEnd(ReasoningMessageEndEvent),
    ReasoningMessageChunk(ReasoningMessageChunkEvent),
    ReasoningEnd(ReasoningEndEvent),
    ReasoningEncryptedValue(ReasoningEncryptedValueEvent),
    SubagentStarted(SubagentStartedEvent),
    SubagentFinished(SubagentFinishedEvent),
    SubagentError(SubagentErrorEvent),
    /// An event type the protocol does not describe.
    #[serde(untagged)]
    Unknown(UnknownEvent),
}

/// Applies `$body` to the payload of every known variant.
macro_rules! each_known {
    ($event:expr, $e:ident => $body:expr, unknown => $unknown:expr) => {
        match $event {
            Event::TextMessageStart($e) => $body,
            Event::TextMessageContent($e) => $body,
            Event::TextMessageEnd($e) => $body,
            Event::TextMessageChunk($e) => $body,
            Event::ToolCallStart($e) => $body,
            Event::ToolCallArgs($e) => $body,
            Event::ToolCallEnd($e) => $body,
            Event::ToolCallChunk($e) => $body,
            Event::ToolCallResult($e) => $body,
            Event::StateSnapshot($e) => $body,
            Event::StateDelta($e) => $body,
            Event::MessagesSnapshot($e) => $body,
            Event::ActivitySnapshot($e) => $body,
            Event::ActivityDelta($e) => $body,
            Event::Raw($e) => $body,
            Event::Custom($e) => $body,
            Event::RunStarted($e) => $body,
            Event::RunFinished($e) => $body,
            Event::RunError($e) => $body,
            Event::StepStarted($e) => $body,
            Event::StepFinished($e) => $body,
            Event::ReasoningStart($e) => $body,
            Event::ReasoningMessageStart($e) => $body,
            Event::ReasoningMessageContent($e) => $body,
            Event::ReasoningMessageEnd($e) => $body,
            Event::ReasoningMessageChunk($e) => $body,
            Event::ReasoningEnd($e) => $body,
            Event::ReasoningEncryptedValue($e) => $body,
            Event::SubagentStarted($e) => $body,
            Event::SubagentFinished($e) => $body,
            Event::SubagentError($e) => $body,
            Event::Unknown(_) => $unknown,
        }
    };
}

/// Applies `$body` to the payload of every attributable variant (those with an
/// optional `subagent_run_id`), `$other` to the rest.
macro_rules! each_attributable {
    ($event:expr, $e:ident => $body:expr, $rest:pat => $other:expr) => {
        match $event {
            Event::TextMessageStart($e) => $body,
            Event::TextMessageContent($e) => $body,
            Event::TextMessageEnd($e) => $body,
            Event::TextMessageChunk($e) => $body,
            Event::ToolCallStart($e) => $body,
            Event::ToolCallArgs($e) => $body,
            Event::ToolCallEnd($e) => $body,
            Event::ToolCallChunk($e) => $body,
            Event::ToolCallResult($e) => $body,
            Event::StateSnapshot($e) => $body,
            Event::StateDelta($e) => $body,
            Event::ActivitySnapshot($e) => $body,
            Event::ActivityDelta($e) => $body,
            Event::Raw($e) => $body,
            Event::Custom($e) => $body,
            Event::StepStarted($e) => $body,
            Event::StepFinished($e) => $body,
            Event::ReasoningStart($e) => $body,
            Event::ReasoningMessageStart($e) => $body,
            Event::ReasoningMessageContent($e) => $body,
            Event::ReasoningMessageEnd($e) => $body,
            Event::ReasoningMessageChunk($e) => $body,
            Event::ReasoningEnd($e) => $body,
            Event::ReasoningEncryptedValue($e) => $body,
            $rest => $other,
        }
    };
}

impl Event {
    /// The event type, or `None` for an [`Event::Unknown`].
    pub fn event_type(&self) -> Option<EventType> {
        Some(match self {
            Event::TextMessageStart(_) => EventType::TextMessageStart,
            Event::TextMessageContent(_) => EventType::TextMessageContent,
            Event::TextMessageEnd(_) => EventType::TextMessageEnd,
            Event::TextMessageChunk(_) => EventType::TextMessageChunk,
            Event::ToolCallStart(_) => EventType::ToolCallStart,
            Event::ToolCallArgs(_) => EventType::ToolCallArgs,
            Event::ToolCallEnd(_) => EventType::ToolCallEnd,
            Event::ToolCallChunk(_) => EventType::ToolCallChunk,
            Event::ToolCallResult(_) => EventType::ToolCallResult,
            Event::StateSnapshot(_) => EventType::StateSnapshot,
            Event::StateDelta(_) => EventType::StateDelta,
            Event::MessagesSnapshot(_) => EventType::MessagesSnapshot,
            Event::ActivitySnapshot(_) => EventType::ActivitySnapshot,
            Event::ActivityDelta(_) => EventType::ActivityDelta,
            Event::Raw(_) => EventType::Raw,
            Event::Custom(_) => EventType::Custom,
            Event::RunStarted(_) => EventType::RunStarted,
            Event::RunFinished(_) => EventType::RunFinished,
            Event::RunError(_) => EventType::RunError,
            Event::StepStarted(_) => EventType::StepStarted,
            Event::StepFinished(_) => EventType::StepFinished,
            Event::ReasoningStart(_) => EventType::ReasoningStart,
            Event::ReasoningMessageStart(_) => EventType::ReasoningMessageStart,
            Event::ReasoningMessageContent(_) => EventType::ReasoningMessageContent,
            Event::ReasoningMessageEnd(_) => EventType::ReasoningMessageEnd,
            Event::ReasoningMessageChunk(_) => EventType::ReasoningMessageChunk,
            Event::ReasoningEnd(_) => EventType::ReasoningEnd,
            Event::ReasoningEncryptedValue(_) => EventType::ReasoningEncryptedValue,
            Event::SubagentStarted(_) => EventType::SubagentStarted,
            Event::SubagentFinished(_) => EventType::SubagentFinished,
            Event::SubagentError(_) => EventType::SubagentError,
            Event::Unknown(_) => return None,
        })
    }

    /// The `type` string, known or not.
    pub fn type_name(&self) -> &str {
        match self {
            Event::Unknown(u) => &u.event_type,
            known => known.event_type().map_or("", EventType::as_str),
        }
    }

    /// The envelope (`None` for an unknown event).
    pub fn base(&self) -> Option<&BaseEvent> {
        each_known!(self, e => Some(&e.base), unknown => None)
    }

    /// The envelope, mutably (`None` for an unknown event).
    pub fn base_mut(&mut self) -> Option<&mut BaseEvent> {
        each_known!(self, e => Some(&mut e.base), unknown => None)
    }

    /// The event's metadata, if any.
    pub fn metadata(&self) -> Option<&Metadata> {
        self.base().and_then(|b| b.metadata.as_deref())
    }

    /// The subagent this event is attributed to (or, for `SUBAGENT_*`, about).
    pub fn subagent_run_id(&self) -> Option<&str> {
        each_attributable!(self, e => e.subagent_run_id.as_deref(), other => match other {
            Event::SubagentStarted(e) => Some(&e.subagent_run_id),
            Event::SubagentFinished(e) => Some(&e.subagent_run_id),
            Event::SubagentError(e) => Some(&e.subagent_run_id),
            _ => None,
        })
    }

    /// Removes the subagent attribution everywhere in the event (for a consumer
    /// or producer that predates subagents). `SUBAGENT_*` events, whose subject
    /// it is, are left alone.
    pub fn clear_subagent_run_id(&mut self) {
        each_attributable!(self, e => e.subagent_run_id = None, other => match other {
            Event::MessagesSnapshot(e) => {
                e.messages.iter_mut().for_each(Message::clear_subagent_run_id);
            }
            Event::RunStarted(e) => {
                if let Some(input) = &mut e.input {
                    input.messages.iter_mut().for_each(Message::clear_subagent_run_id);
                }
            }
            Event::RunFinished(e) => {
                if let Some(RunFinishedOutcome::Interrupt { interrupts }) = &mut e.outcome {
                    interrupts.iter_mut().for_each(|i| i.subagent_run_id = None);
                }
            }
            _ => {}
        });
    }

    /// Decodes an event leniently (the runtime processing model).
    pub fn from_value(value: Value) -> Result<Decoded<Event>, DecodeError> {
        Self::from_value_with(value, DecodeMode::Lenient)
    }

    /// Decodes an event in the given mode.
    pub fn from_value_with(value: Value, mode: DecodeMode) -> Result<Decoded<Event>, DecodeError> {
        top(mode, "event", |cx| decode_event(value, cx))
    }

    /// Parses and decodes one event from JSON text, leniently.
    pub fn from_json(text: &str) -> Result<Decoded<Event>, crate::Error> {
        Self::from_json_with(text, DecodeMode::Lenient)
    }

    /// Parses and decodes one event from JSON text in the given mode.
    ///
    /// Faster than parsing to a `Value` first: the event's own members are read
    /// into a short list instead of a hashed map.
    pub fn from_json_with(text: &str, mode: DecodeMode) -> Result<Decoded<Event>, crate::Error> {
        let parsed: crate::decode::TopLevel = serde_json::from_str(text)?;
        Ok(top(mode, "event", |cx| match parsed {
            crate::decode::TopLevel::Object(members) => decode_members(members, cx),
            crate::decode::TopLevel::Other(other) => {
                Err(cx.error(&Path::ROOT, crate::decode::expected("object", &other)))
            }
        })?)
    }

    /// Compact JSON, exactly as it goes on the wire.
    pub fn to_json(&self) -> String {
        // Serializing these types cannot fail: every map key is a string.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Removes what a peer speaking `peer` does not know, so that a 1.0 consumer
    /// never receives the 1.1-only `encryptedValueType`.
    pub fn adapt_for_peer(&mut self, peer: ProtocolVersion) {
        if peer.has_encrypted_value_type() {
            return;
        }
        match self {
            Event::ReasoningEncryptedValue(e) => e.encrypted_value_type = None,
            Event::MessagesSnapshot(e) => e.messages.iter_mut().for_each(Message::strip_1_1),
            Event::RunStarted(e) => {
                if let Some(input) = &mut e.input {
                    input.strip_1_1();
                }
            }
            _ => {}
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

fn decode_base(o: &mut Obj<'_>, cx: &mut Cx) -> DResult<BaseEvent> {
    Ok(BaseEvent {
        timestamp: o.opt::<Timestamp>(cx, "timestamp")?.map(|t| t.0),
        raw_event: o
            .opt_legacy_null::<NonNullJson>(cx, "rawEvent")?
            .map(|v| Box::new(v.0)),
        metadata: o.opt::<Metadata>(cx, "metadata")?.map(Box::new),
    })
}

fn decode_event(value: Value, cx: &mut Cx) -> DResult<Event> {
    match value {
        Value::Object(map) => decode_members(map.into_iter().collect(), cx),
        other => Err(cx.error(&Path::ROOT, crate::decode::expected("object", &other))),
    }
}

fn decode_members(members: Vec<(String, Value)>, cx: &mut Cx) -> DResult<Event> {
    let root = Path::ROOT;
    let name = members
        .iter()
        .find(|(k, _)| k == "type")
        .and_then(|(_, v)| v.as_str());
    let event_type = match name.map(EventType::from_str) {
        Some(Ok(t)) => t,
        unknown => {
            let event_type = match unknown {
                Some(Err(())) => name.unwrap_or_default().to_owned(),
                _ => String::new(),
            };
            return Ok(Event::Unknown(UnknownEvent {
                event_type,
                value: Value::Object(members.into_iter().collect()),
            }));
        }
    };
    cx.context = event_type.as_str();
    let mut o = Obj::from_members(members, cx, &root);
    o.take("type");
    let base = decode_base(&mut o, cx)?;
    let event = decode_body(event_type, &mut o, cx, base)?;
    o.finish(cx)?;
    Ok(event)
}

fn decode_body(t: EventType, o: &mut Obj<'_>, cx: &mut Cx, base: BaseEvent) -> DResult<Event> {
    use EventType as T;
    Ok(match t {
        T::TextMessageStart => Event::TextMessageStart(TextMessageStartEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            role: o.opt(cx, "role")?,
            name: o.opt(cx, "name")?,
            base,
        }),
        T::TextMessageContent => Event::TextMessageContent(TextMessageContentEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            delta: o.req(cx, "delta")?,
            base,
        }),
        T::TextMessageEnd => Event::TextMessageEnd(TextMessageEndEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            base,
        }),
        T::TextMessageChunk => Event::TextMessageChunk(TextMessageChunkEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.opt(cx, "messageId")?,
            role: o.opt(cx, "role")?,
            delta: o.opt(cx, "delta")?,
            name: o.opt(cx, "name")?,
            base,
        }),
        T::ToolCallStart => Event::ToolCallStart(ToolCallStartEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            tool_call_id: o.req(cx, "toolCallId")?,
            tool_call_name: o.req(cx, "toolCallName")?,
            parent_message_id: o.opt_legacy_null(cx, "parentMessageId")?,
            base,
        }),
        T::ToolCallArgs => Event::ToolCallArgs(ToolCallArgsEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            tool_call_id: o.req(cx, "toolCallId")?,
            delta: o.req(cx, "delta")?,
            base,
        }),
        T::ToolCallEnd => Event::ToolCallEnd(ToolCallEndEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            tool_call_id: o.req(cx, "toolCallId")?,
            base,
        }),
        T::ToolCallChunk => Event::ToolCallChunk(ToolCallChunkEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            tool_call_id: o.opt(cx, "toolCallId")?,
            tool_call_name: o.opt(cx, "toolCallName")?,
            parent_message_id: o.opt_legacy_null(cx, "parentMessageId")?,
            delta: o.opt(cx, "delta")?,
            base,
        }),
        T::ToolCallResult => Event::ToolCallResult(ToolCallResultEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            tool_call_id: o.req(cx, "toolCallId")?,
            content: o.req(cx, "content")?,
            role: if o.opt_literal(cx, "role", "tool")? {
                Some(ToolRole::Tool)
            } else {
                None
            },
            base,
        }),
        T::StateSnapshot => Event::StateSnapshot(StateSnapshotEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            snapshot: o.req::<AnyJson>(cx, "snapshot")?.0,
            base,
        }),
        T::StateDelta => Event::StateDelta(StateDeltaEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            delta: o.req(cx, "delta")?,
            base,
        }),
        T::MessagesSnapshot => Event::MessagesSnapshot(MessagesSnapshotEvent {
            messages: o.req(cx, "messages")?,
            base,
        }),
        T::ActivitySnapshot => Event::ActivitySnapshot(ActivitySnapshotEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            activity_type: o.req(cx, "activityType")?,
            content: o.req(cx, "content")?,
            replace: o.opt(cx, "replace")?,
            base,
        }),
        T::ActivityDelta => Event::ActivityDelta(ActivityDeltaEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            activity_type: o.req(cx, "activityType")?,
            patch: o.req(cx, "patch")?,
            base,
        }),
        T::Raw => Event::Raw(RawEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            event: o.req::<AnyJson>(cx, "event")?.0,
            source: o.opt(cx, "source")?,
            base,
        }),
        T::Custom => Event::Custom(CustomEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            name: o.req(cx, "name")?,
            value: o.req::<AnyJson>(cx, "value")?.0,
            base,
        }),
        T::RunStarted => Event::RunStarted(RunStartedEvent {
            thread_id: o.req(cx, "threadId")?,
            run_id: o.req(cx, "runId")?,
            protocol_version: o.opt(cx, "protocolVersion")?,
            parent_run_id: o.opt(cx, "parentRunId")?,
            input: o.opt::<RunAgentInput>(cx, "input")?.map(Box::new),
            base,
        }),
        T::RunFinished => Event::RunFinished(RunFinishedEvent {
            thread_id: o.req(cx, "threadId")?,
            run_id: o.req(cx, "runId")?,
            result: o.opt_legacy_null::<NonNullJson>(cx, "result")?.map(|v| v.0),
            outcome: o.opt_legacy_null(cx, "outcome")?,
            usage: o.opt(cx, "usage")?,
            base,
        }),
        T::RunError => Event::RunError(RunErrorEvent {
            message: o.req(cx, "message")?,
            code: o.opt(cx, "code")?,
            usage: o.opt(cx, "usage")?,
            base,
        }),
        T::StepStarted => Event::StepStarted(StepStartedEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            step_name: o.req(cx, "stepName")?,
            base,
        }),
        T::StepFinished => Event::StepFinished(StepFinishedEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            step_name: o.req(cx, "stepName")?,
            base,
        }),
        T::ReasoningStart => Event::ReasoningStart(ReasoningStartEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            base,
        }),
        T::ReasoningMessageStart => Event::ReasoningMessageStart(ReasoningMessageStartEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            role: {
                o.req_literal(cx, "role", "reasoning")?;
                ReasoningRole::Reasoning
            },
            base,
        }),
        T::ReasoningMessageContent => {
            Event::ReasoningMessageContent(ReasoningMessageContentEvent {
                subagent_run_id: o.opt(cx, "subagentRunId")?,
                message_id: o.req(cx, "messageId")?,
                delta: o.req(cx, "delta")?,
                base,
            })
        }
        T::ReasoningMessageEnd => Event::ReasoningMessageEnd(ReasoningMessageEndEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            base,
        }),
        T::ReasoningMessageChunk => Event::ReasoningMessageChunk(ReasoningMessageChunkEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.opt(cx, "messageId")?,
            delta: o.opt(cx, "delta")?,
            base,
        }),
        T::ReasoningEnd => Event::ReasoningEnd(ReasoningEndEvent {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            message_id: o.req(cx, "messageId")?,
            base,
        }),
        T::ReasoningEncryptedValue => {
            Event::ReasoningEncryptedValue(ReasoningEncryptedValueEvent {
                subagent_run_id: o.opt(cx, "subagentRunId")?,
                subtype: o.req(cx, "subtype")?,
                entity_id: o.req(cx, "entityId")?,
                encrypted_value: o.req(cx, "encryptedValue")?,
                encrypted_value_type: o.opt(cx, "encryptedValueType")?,
                base,
            })
        }
        T::SubagentStarted => Event::SubagentStarted(SubagentStartedEvent {
            subagent_run_id: o.req(cx, "subagentRunId")?,
            name: o.req(cx, "name")?,
            description: o.opt(cx, "description")?,
            parent_subagent_run_id: o.opt(cx, "parentSubagentRunId")?,
            parent_tool_call_id: o.opt(cx, "parentToolCallId")?,
            parent_message_id: o.opt(cx, "parentMessageId")?,
            base,
        }),
        T::SubagentFinished => Event::SubagentFinished(SubagentFinishedEvent {
            subagent_run_id: o.req(cx, "subagentRunId")?,
            result: o.opt_legacy_null::<NonNullJson>(cx, "result")?.map(|v| v.0),
            outcome: o.opt(cx, "outcome")?,
            base,
        }),
        T::SubagentError => Event::SubagentError(SubagentErrorEvent {
            subagent_run_id: o.req(cx, "subagentRunId")?,
            message: o.req(cx, "message")?,
            code: o.opt(cx, "code")?,
            base,
        }),
    })
}

impl Decode for TextMessageRole {
    const EXPECTED: &'static str = "role";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        match value.as_str() {
            Some("developer") => Ok(TextMessageRole::Developer),
            Some("system") => Ok(TextMessageRole::System),
            Some("assistant") => Ok(TextMessageRole::Assistant),
            Some("user") => Ok(TextMessageRole::User),
            _ => Err(cx.error(
                path,
                "Invalid option: expected one of \"developer\"|\"system\"|\"assistant\"|\"user\"",
            )),
        }
    }
}

impl Decode for EncryptedValueSubtype {
    const EXPECTED: &'static str = "subtype";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        match value.as_str() {
            Some("tool-call") => Ok(EncryptedValueSubtype::ToolCall),
            Some("message") => Ok(EncryptedValueSubtype::Message),
            _ => Err(cx.error(
                path,
                "Invalid option: expected one of \"tool-call\"|\"message\"",
            )),
        }
    }
}

impl Decode for Event {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, _path: &Path<'_>) -> DResult<Self> {
        decode_event(value, cx)
    }
}
