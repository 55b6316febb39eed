//! Folding events into what a consumer holds: the messages, the state and the
//! outcome of the last run.
//!
//! [`Session::apply`] produces the same messages and state as the reference
//! client's default apply stage (`defaultApplyEvents` of `@ag-ui/client`) fed
//! the same events, and reports what it cannot apply as [`Warning`]s worded like
//! that client's console warnings. It never fails.
//!
//! ```
//! use agwire_core::apply::Session;
//! use agwire_core::Event;
//!
//! let mut session = Session::default();
//! for line in [
//!     r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
//!     r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
//!     r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"Hi"}"#,
//!     r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
//!     r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","result":42}"#,
//! ] {
//!     let event = Event::from_json(line).unwrap().value;
//!     let applied = session.apply(&event);
//!     assert!(applied.warnings.is_empty());
//! }
//! assert_eq!(session.messages.len(), 1);
//! assert_eq!(session.result, Some(serde_json::json!(42)));
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::content::Content;
use crate::event::{
    ActivityDeltaEvent, ActivitySnapshotEvent, EncryptedValueSubtype, Event, MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent, RunFinishedEvent, RunStartedEvent, StateDeltaEvent,
    TextMessageRole, TextMessageStartEvent, ToolCallArgsEvent, ToolCallEndEvent,
    ToolCallResultEvent, ToolCallStartEvent,
};
use crate::message::{
    ActivityMessage, AssistantMessage, Message, ReasoningMessage, TextMessage, ToolCall,
    ToolMessage, UserMessage,
};
use crate::outcome::{Interrupt, RunFinishedOutcome};
use crate::patch::reference::pretty;
use crate::patch::{PatchError, Patched, patch_like_reference};
use crate::usage::TokenUsage;
use crate::{Metadata, Warning, WarningKind};

/// The metadata key under which the reference client reads a snapshot's
/// declaration of which activity types it owns.
const ACTIVITY_HISTORY_METADATA: &str = "@ag-ui/client";

/// What a consumer holds after folding a stream (`#[non_exhaustive]`: read
/// it; a pipeline builds it).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Session {
    /// The conversation, in order.
    ///
    /// Free to edit between calls to [`Session::apply`]: the session notices a
    /// vector that was replaced, grown or shrunk. The one edit it cannot notice is
    /// overwriting a message in place with one of a *different* id; call
    /// [`Session::reindex`] after doing that.
    pub messages: Vec<Message>,
    /// The shared state: any JSON value (`null`, `0` and arrays included).
    pub state: Value,
    /// Interrupts of the most recent interrupted run. Replaced at every
    /// `RUN_FINISHED` (emptied unless that run was interrupted), as the reference
    /// client does; the next run's `resume` must answer each of them.
    pub pending_interrupts: Vec<Interrupt>,
    /// `RUN_FINISHED.result` of the last successful run, as the reference
    /// client's `runAgent()` returns it: a successful run without a result resets
    /// it to `None`, an interrupted or cancelled one leaves it alone. That client
    /// starts each `runAgent()` call from `None`; clear it yourself when you
    /// start a new request on the same session.
    pub result: Option<Value>,
    /// Frontend tool calls the last run left for the client to answer: the ids
    /// its successful `RUN_FINISHED` named in `pendingToolCallIds`, or, when it
    /// named none, every call the run started and no `TOOL_CALL_RESULT`
    /// answered. Replaced at every `RUN_FINISHED` (emptied for an interrupted or
    /// cancelled run).
    pub pending_tool_call_ids: Vec<String>,
    /// Thread of the most recent `RUN_STARTED`.
    pub thread_id: Option<String>,
    /// Run id of the most recent `RUN_STARTED`.
    pub run_id: Option<String>,
    /// How the most recent run ended; `None` before any run ended and from a
    /// `RUN_STARTED` until that run's terminal event.
    pub last_run: Option<RunEnd>,
    /// Tool calls started and answered since the last `RUN_STARTED`.
    tally: ToolCallTally,
    /// A patch left the reference client's state `undefined`: the visible
    /// state was not replaced, but the next `STATE_DELTA` patches `null`.
    state_undefined: bool,
    /// Positions by id, and which positions the reference client would hold
    /// as one object; bookkeeping, so never part of equality.
    lookup: Lookup,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// `RUN_FINISHED`.
    Finished {
        /// The outcome; an absent one is recorded as success.
        outcome: RunFinishedOutcome,
        /// Token usage the producer reported.
        usage: Option<Vec<TokenUsage>>,
    },
    /// `RUN_ERROR`.
    Errored {
        /// The producer's message.
        message: String,
        /// The producer's code.
        code: Option<String>,
        /// Partial token usage the producer reported.
        usage: Option<Vec<TokenUsage>>,
    },
}

/// What one apply step changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// The messages changed (where the reference client emits a messages mutation).
    pub messages_changed: bool,
    /// The state changed (where the reference client emits a state mutation).
    pub state_changed: bool,
    /// What could not be applied, worded like the reference client's warnings.
    pub warnings: Vec<Warning>,
}

impl Applied {
    fn messages() -> Self {
        Self {
            messages_changed: true,
            ..Self::default()
        }
    }

    fn messages_if(changed: bool) -> Self {
        Self {
            messages_changed: changed,
            ..Self::default()
        }
    }

    fn warn(kind: WarningKind, message: String) -> Self {
        Self {
            warnings: vec![Warning::new(kind, message)],
            ..Self::default()
        }
    }

    fn with_warning(mut self, kind: WarningKind, message: String) -> Self {
        self.warnings.push(Warning::new(kind, message));
        self
    }

    /// Folds `other` (a later step) into `self`.
    pub fn merge(&mut self, other: Applied) {
        self.messages_changed |= other.messages_changed;
        self.state_changed |= other.state_changed;
        self.warnings.extend(other.warnings);
    }
}

impl Default for Session {
    /// No messages and the state `{}`, the reference client's defaults.
    fn default() -> Self {
        Self::new(Vec::new(), Value::Object(Map::new()))
    }
}

impl Session {
    /// A session holding `messages` and `state` (the reference client starts
    /// from `{}` when it has no state).
    pub fn new(messages: Vec<Message>, state: Value) -> Self {
        let mut session = Self {
            messages,
            state,
            pending_interrupts: Vec::new(),
            result: None,
            pending_tool_call_ids: Vec::new(),
            thread_id: None,
            run_id: None,
            last_run: None,
            tally: ToolCallTally::default(),
            state_undefined: false,
            lookup: Lookup::default(),
        };
        session.lookup.reset(&session.messages);
        session
    }

    /// Rebuilds the id lookup after `messages` was edited in a way the session
    /// cannot notice (see [`Session::messages`]).
    pub fn reindex(&mut self) {
        self.lookup.reset(&self.messages);
    }

    /// Folds every event in order; the result is the union of each step's.
    pub fn apply_all<'a>(&mut self, events: impl IntoIterator<Item = &'a Event>) -> Applied {
        let mut applied = Applied::default();
        for event in events {
            applied.merge(self.apply(event));
        }
        applied
    }

    /// Folds one event (already chunk-expanded and verified). Never fails:
    /// whatever cannot be applied is reported as a warning, as the reference
    /// client does.
    ///
    /// A `*_CHUNK` event is not applied: the reference client throws on one
    /// (`TEXT_MESSAGE_CHUNK must be transformed before being applied`), and this
    /// reports that sentence as a warning instead. An [`Event::Unknown`] changes
    /// nothing, as in the reference client.
    pub fn apply(&mut self, event: &Event) -> Applied {
        self.lookup.sync(&self.messages);
        let applied = match event {
            Event::TextMessageStart(e) => self.text_message_start(e),
            Event::TextMessageContent(e) => self.append_content(
                &e.message_id,
                &e.delta,
                e.base.metadata.as_deref(),
                Stream::Text,
            ),
            Event::TextMessageEnd(e) => {
                self.end_message(&e.message_id, e.base.metadata.as_deref(), Stream::Text)
            }
            Event::ReasoningMessageStart(e) => self.open_message(
                &e.message_id,
                e.base.metadata.as_deref(),
                Stream::Reasoning,
                || {
                    Message::Reasoning(ReasoningMessage {
                        id: e.message_id.clone(),
                        subagent_run_id: e.subagent_run_id.clone(),
                        ..ReasoningMessage::default()
                    })
                },
            ),
            Event::ReasoningMessageContent(e) => self.append_content(
                &e.message_id,
                &e.delta,
                e.base.metadata.as_deref(),
                Stream::Reasoning,
            ),
            Event::ReasoningMessageEnd(e) => {
                self.end_message(&e.message_id, e.base.metadata.as_deref(), Stream::Reasoning)
            }
            Event::ToolCallStart(e) => self.tool_call_start(e),
            Event::ToolCallArgs(e) => self.tool_call_args(e),
            Event::ToolCallEnd(e) => self.tool_call_end(e),
            Event::ToolCallResult(e) => self.tool_call_result(e),
            Event::StateSnapshot(e) => {
                self.state = e.snapshot.clone();
                self.state_undefined = false;
                Applied {
                    state_changed: true,
                    ..Applied::default()
                }
            }
            Event::StateDelta(e) => self.state_delta(e),
            Event::MessagesSnapshot(e) => self.messages_snapshot(e),
            Event::ActivitySnapshot(e) => self.activity_snapshot(e),
            Event::ActivityDelta(e) => self.activity_delta(e),
            Event::RunStarted(e) => self.run_started(e),
            Event::RunFinished(e) => {
                self.run_finished(e);
                Applied::default()
            }
            Event::RunError(e) => {
                self.last_run = Some(RunEnd::Errored {
                    message: e.message.clone(),
                    code: e.code.clone(),
                    usage: e.usage.clone(),
                });
                Applied::default()
            }
            Event::ReasoningEncryptedValue(e) => self.encrypted_value(e),
            Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_) => Applied::warn(
                WarningKind::Tolerated,
                format!(
                    "{} must be transformed before being applied",
                    event.type_name()
                ),
            ),
            Event::Raw(_)
            | Event::Custom(_)
            | Event::StepStarted(_)
            | Event::StepFinished(_)
            | Event::ReasoningStart(_)
            | Event::ReasoningEnd(_)
            | Event::SubagentStarted(_)
            | Event::SubagentFinished(_)
            | Event::SubagentError(_)
            | Event::Unknown(_) => Applied::default(),
        };
        self.lookup.stamp(&self.messages);
        applied
    }

    fn text_message_start(&mut self, e: &TextMessageStartEvent) -> Applied {
        self.open_message(
            &e.message_id,
            e.base.metadata.as_deref(),
            Stream::Text,
            || {
                let id = e.message_id.clone();
                let name = e.name.clone();
                let subagent_run_id = e.subagent_run_id.clone();
                match e.role.unwrap_or_default() {
                    TextMessageRole::Assistant => Message::Assistant(AssistantMessage {
                        id,
                        content: Some(String::new()),
                        name,
                        subagent_run_id,
                        ..AssistantMessage::default()
                    }),
                    TextMessageRole::User => Message::User(UserMessage {
                        id,
                        content: Content::Text(String::new()),
                        name,
                        encrypted_value: None,
                        encrypted_value_type: None,
                        metadata: None,
                        subagent_run_id,
                    }),
                    role => {
                        let text = TextMessage {
                            id,
                            content: String::new(),
                            name,
                            subagent_run_id,
                            ..TextMessage::default()
                        };
                        if role == TextMessageRole::Developer {
                            Message::Developer(text)
                        } else {
                            Message::System(text)
                        }
                    }
                }
            },
        )
    }

    /// A `*_START`: reuses a message that already has the id, whatever its role
    /// (a tool call may have created it as its parent), except an activity message.
    fn open_message(
        &mut self,
        id: &str,
        metadata: Option<&Metadata>,
        stream: Stream,
        create: impl FnOnce() -> Message,
    ) -> Applied {
        let at = match self.lookup.message(&self.messages, id) {
            Some(at) if self.messages[at].role() == crate::Role::Activity => {
                return Applied::warn(WarningKind::Tolerated, stream.activity_clash("START", id));
            }
            Some(at) => at,
            None => {
                let mut message = create();
                merge_metadata(message.metadata_mut(), metadata);
                self.push(message);
                return Applied::messages();
            }
        };
        let merged = merge_metadata(self.messages[at].metadata_mut(), metadata);
        if merged {
            self.changed(at);
        }
        Applied::messages_if(merged)
    }

    fn append_content(
        &mut self,
        id: &str,
        delta: &str,
        metadata: Option<&Metadata>,
        stream: Stream,
    ) -> Applied {
        let Some(at) = self.lookup.message(&self.messages, id) else {
            return Applied::warn(WarningKind::MissingTarget, stream.missing("CONTENT", id));
        };
        let message = &mut self.messages[at];
        // Text goes onto whatever string the message holds; content of any other
        // shape (parts, or none at all) is replaced by the text, as the reference
        // client does.
        match message {
            Message::Activity(_) => {
                return Applied::warn(WarningKind::Tolerated, stream.activity_clash("CONTENT", id));
            }
            Message::Developer(m) | Message::System(m) => m.content.push_str(delta),
            Message::Reasoning(m) => m.content.push_str(delta),
            Message::Assistant(m) => m.content.get_or_insert_with(String::new).push_str(delta),
            Message::User(UserMessage { content, .. })
            | Message::Tool(ToolMessage { content, .. }) => match content {
                Content::Text(text) => text.push_str(delta),
                Content::Parts(_) => *content = Content::Text(delta.to_owned()),
            },
        }
        merge_metadata(message.metadata_mut(), metadata);
        self.changed(at);
        Applied::messages()
    }

    fn end_message(&mut self, id: &str, metadata: Option<&Metadata>, stream: Stream) -> Applied {
        let Some(at) = self.lookup.message(&self.messages, id) else {
            return Applied::warn(WarningKind::MissingTarget, stream.missing("END", id));
        };
        let message = &mut self.messages[at];
        if message.role() == crate::Role::Activity {
            return Applied::warn(WarningKind::Tolerated, stream.activity_clash("END", id));
        }
        let merged = merge_metadata(message.metadata_mut(), metadata);
        if merged {
            self.changed(at);
        }
        Applied::messages_if(merged)
    }

    fn tool_call_start(&mut self, e: &ToolCallStartEvent) -> Applied {
        let id = &e.tool_call_id;
        let name = &e.tool_call_name;
        self.tally.start(id);

        // A replayed start (an earlier run's call re-sent, or one stream
        // delivered twice) updates the call it names instead of adding another.
        if let Some((at, call)) = self.lookup.tool_call(&self.messages, id) {
            let Some(existing) = tool_call_mut(&mut self.messages[at], call) else {
                return Applied::default();
            };
            let mut applied = Applied::default();
            let renamed = existing.function.name != *name;
            if renamed {
                applied = applied.with_warning(
                    WarningKind::Tolerated,
                    format!(
                        "TOOL_CALL_START: tool call '{id}' already exists with name '{}' — updating it to '{name}'",
                        existing.function.name
                    ),
                );
                existing.function.name.clone_from(name);
            }
            let merged = merge_metadata(&mut existing.metadata, e.base.metadata.as_deref());
            applied.messages_changed = merged || renamed;
            if applied.messages_changed {
                self.changed(at);
            }
            return applied;
        }

        let mut applied = Applied::messages();
        // An empty parent id is no parent at all, as in the reference client.
        let parent = e.parent_message_id.as_deref().filter(|p| !p.is_empty());
        let at = match parent.map(|p| (p, self.lookup.message(&self.messages, p))) {
            Some((_, Some(at))) if self.messages[at].role() == crate::Role::Assistant => at,
            Some((p, found)) => {
                if let Some(at) = found {
                    applied = applied.with_warning(
                        WarningKind::Tolerated,
                        format!(
                            "TOOL_CALL_START: parentMessageId '{p}' matches a '{}' message, not assistant — falling back to toolCallId",
                            self.messages[at].role().as_str()
                        ),
                    );
                }
                let new_id = if found.is_some() { id } else { p };
                self.push_parent(new_id, e.subagent_run_id.as_deref())
            }
            None => self.push_parent(id, e.subagent_run_id.as_deref()),
        };

        let mut call = ToolCall::new(id.clone(), name.clone(), "");
        merge_metadata(&mut call.metadata, e.base.metadata.as_deref());
        if let Message::Assistant(parent) = &mut self.messages[at] {
            parent.tool_calls.get_or_insert_with(Vec::new).push(call);
        }
        self.lookup.add_tool_call(id, at);
        self.changed(at);
        applied
    }

    /// Appends a new assistant message to carry a tool call. It takes the
    /// call's attribution only when it is the first message with its id — the
    /// reference client's test for having created it.
    fn push_parent(&mut self, id: &str, subagent_run_id: Option<&str>) -> usize {
        let fresh = self.lookup.message(&self.messages, id).is_none();
        self.push(Message::Assistant(AssistantMessage {
            id: id.to_owned(),
            tool_calls: Some(Vec::new()),
            subagent_run_id: subagent_run_id.filter(|_| fresh).map(str::to_owned),
            ..AssistantMessage::default()
        }));
        self.messages.len() - 1
    }

    fn tool_call_args(&mut self, e: &ToolCallArgsEvent) -> Applied {
        let Some((at, call)) = self.lookup.tool_call(&self.messages, &e.tool_call_id) else {
            return Applied::warn(
                WarningKind::MissingTarget,
                format!(
                    "TOOL_CALL_ARGS: No message found containing tool call with ID '{}'",
                    e.tool_call_id
                ),
            );
        };
        if let Some(call) = tool_call_mut(&mut self.messages[at], call) {
            call.function.arguments.push_str(&e.delta);
            merge_metadata(&mut call.metadata, e.base.metadata.as_deref());
        }
        self.changed(at);
        Applied::messages()
    }

    fn tool_call_end(&mut self, e: &ToolCallEndEvent) -> Applied {
        let Some((at, call)) = self.lookup.tool_call(&self.messages, &e.tool_call_id) else {
            return Applied::warn(
                WarningKind::MissingTarget,
                format!(
                    "TOOL_CALL_END: No message found containing tool call with ID '{}'",
                    e.tool_call_id
                ),
            );
        };
        let merged = tool_call_mut(&mut self.messages[at], call)
            .is_some_and(|call| merge_metadata(&mut call.metadata, e.base.metadata.as_deref()));
        if merged {
            self.changed(at);
        }
        Applied::messages_if(merged)
    }

    fn tool_call_result(&mut self, e: &ToolCallResultEvent) -> Applied {
        self.tally.answer(&e.tool_call_id);
        let mut message = ToolMessage {
            id: e.message_id.clone(),
            content: e.content.clone(),
            tool_call_id: e.tool_call_id.clone(),
            error: None,
            encrypted_value: None,
            encrypted_value_type: None,
            metadata: None,
            subagent_run_id: e.subagent_run_id.clone(),
        };
        merge_metadata(&mut message.metadata, e.base.metadata.as_deref());
        let message = Message::Tool(message);

        // A provider expects an assistant's tool calls to be followed directly by
        // their results, so the result goes right after the assistant message
        // that issued the call and the results already recorded for it — even
        // when later text has been appended since.
        match self.lookup.tool_call(&self.messages, &e.tool_call_id) {
            None => self.push(message),
            Some((owner, _)) => {
                let at = self.messages[owner + 1..]
                    .iter()
                    .position(|m| m.role() != crate::Role::Tool)
                    .map_or(self.messages.len(), |offset| owner + 1 + offset);
                self.insert(at, message);
            }
        }
        Applied::messages()
    }

    fn state_delta(&mut self, e: &StateDeltaEvent) -> Applied {
        let state_changed = Applied {
            state_changed: true,
            ..Applied::default()
        };
        let failed = |state: &str, error: PatchError| {
            Applied::warn(
                WarningKind::StatePatchFailed,
                format!(
                    "Failed to apply state patch:\nCurrent state: {state}\nPatch operations: {}\nError: {error}",
                    pretty(&e.delta),
                ),
            )
        };
        if self.state_undefined {
            // The reference client patches a copy of its `undefined`, which is `null`.
            let mut doc = Value::Null;
            return match patch_like_reference(&mut doc, &e.delta) {
                Ok(Patched::Document) => {
                    self.state = doc;
                    self.state_undefined = false;
                    state_changed
                }
                Ok(Patched::Undefined) => Applied::default(),
                Err(error) => failed("undefined", error),
            };
        }
        match patch_like_reference(&mut self.state, &e.delta) {
            Ok(Patched::Document) => state_changed,
            Ok(Patched::Undefined) => {
                self.state_undefined = true;
                Applied::default()
            }
            Err(error) => failed(&pretty(&self.state), error),
        }
    }

    fn messages_snapshot(&mut self, e: &MessagesSnapshotEvent) -> Applied {
        let snapshot = &e.messages;
        // The last copy of an id wins when the snapshot repeats one.
        let by_id: HashMap<&str, usize> = snapshot
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id(), i))
            .collect();
        let authority = ActivityAuthority::of(e.base.metadata.as_deref());
        let snapshot_has_activity = snapshot.iter().any(|m| matches!(m, Message::Activity(_)));
        let snapshot_has_reasoning = snapshot.iter().any(|m| matches!(m, Message::Reasoning(_)));

        // Activity and reasoning messages are often client-only (a backend may
        // never send them back), so one the snapshot omits survives unless the
        // snapshot claims authority over its kind: by carrying messages of that
        // kind, or, for activity, by declaring the types it owns.
        let survives_omission = |m: &Message| match m {
            Message::Activity(a) => match &authority {
                ActivityAuthority::Inferred => !snapshot_has_activity,
                ActivityAuthority::All => false,
                ActivityAuthority::Only(types) => !types.contains(&a.activity_type),
            },
            Message::Reasoning(_) => !snapshot_has_reasoning,
            _ => false,
        };

        // Every message with an id the snapshot carries becomes that one
        // snapshot message, in place; several places can hold one object.
        let mut snapshot_objects: HashMap<usize, u64> = HashMap::new();
        let mut next = Vec::with_capacity(self.messages.len().max(snapshot.len()));
        let mut objects = Vec::with_capacity(next.capacity());
        let old_objects = std::mem::take(&mut self.lookup.aliases.of);
        for (at, message) in std::mem::take(&mut self.messages).into_iter().enumerate() {
            let object = match old_objects.get(at) {
                Some(&object) => object,
                None => self.lookup.aliases.fresh(),
            };
            match by_id.get(message.id()) {
                Some(&index) => {
                    next.push(snapshot[index].clone());
                    let object = *snapshot_objects
                        .entry(index)
                        .or_insert_with(|| self.lookup.aliases.fresh());
                    objects.push(object);
                }
                None if survives_omission(&message) => {
                    next.push(message);
                    objects.push(object);
                }
                None => {}
            }
        }
        let present: HashSet<&str> = next.iter().map(Message::id).collect();
        let added: Vec<Message> = snapshot
            .iter()
            .filter(|m| !present.contains(m.id()))
            .cloned()
            .collect();
        for _ in &added {
            objects.push(self.lookup.aliases.fresh());
        }
        next.extend(added);
        self.messages = next;
        self.lookup.aliases.set(objects);
        self.lookup.invalidate();
        Applied::messages()
    }

    fn activity_snapshot(&mut self, e: &ActivitySnapshotEvent) -> Applied {
        let replace = e.replace.unwrap_or(true);
        let fresh = || ActivityMessage {
            id: e.message_id.clone(),
            activity_type: e.activity_type.clone(),
            content: e.content.clone(),
            metadata: None,
            subagent_run_id: e.subagent_run_id.clone(),
        };
        let metadata = e.base.metadata.as_deref();
        match self.lookup.message(&self.messages, &e.message_id) {
            None => {
                let mut message = fresh();
                merge_metadata(&mut message.metadata, metadata);
                self.push(Message::Activity(message));
            }
            Some(at) => match &mut self.messages[at] {
                Message::Activity(existing) if replace => {
                    // A replacing snapshot re-mints the activity as a new
                    // object: new type, content and attribution, but the
                    // metadata built up so far stays.
                    existing.activity_type.clone_from(&e.activity_type);
                    existing.content.clone_from(&e.content);
                    existing.subagent_run_id.clone_from(&e.subagent_run_id);
                    merge_metadata(&mut existing.metadata, metadata);
                    self.lookup.aliases.detach(at);
                }
                Message::Activity(existing) => {
                    let merged = merge_metadata(&mut existing.metadata, metadata);
                    if merged {
                        self.changed(at);
                    }
                }
                _ if replace => {
                    let mut message = fresh();
                    merge_metadata(&mut message.metadata, metadata);
                    self.replace(at, Message::Activity(message));
                }
                _ => {}
            },
        }
        // The reference client reports the messages as changed even when a
        // `replace: false` snapshot left everything as it was.
        Applied::messages()
    }

    fn activity_delta(&mut self, e: &ActivityDeltaEvent) -> Applied {
        let Some(at) = self.lookup.message(&self.messages, &e.message_id) else {
            // The reference client skips this silently; the specification asks
            // for a warning.
            return Applied::warn(
                WarningKind::MissingTarget,
                format!(
                    "ACTIVITY_DELTA: No activity message found with ID '{}'",
                    e.message_id
                ),
            );
        };
        let Message::Activity(activity) = &mut self.messages[at] else {
            return Applied::warn(
                WarningKind::Tolerated,
                format!(
                    "ACTIVITY_DELTA: Message '{}' is not an activity message",
                    e.message_id
                ),
            );
        };
        // Metadata does not depend on the patch: a stale path must not cost the
        // message the keys this event carries.
        let merged = merge_metadata(&mut activity.metadata, e.base.metadata.as_deref());
        if merged {
            self.changed(at);
        }
        let Message::Activity(activity) = &mut self.messages[at] else {
            return Applied::messages_if(merged);
        };
        let mut doc = Value::Object(std::mem::take(&mut activity.content));
        match patch_like_reference(&mut doc, &e.patch) {
            Ok(patched) => {
                let mut applied = Applied::messages();
                if patched == Patched::Undefined {
                    doc = Value::Null;
                }
                activity.content = match doc {
                    Value::Object(content) => content,
                    // The reference client stores whatever the patch left and
                    // patches `{}` next time when that is `null` or `undefined`;
                    // an activity message here always holds an object, so it
                    // is `{}` now.
                    other => {
                        applied = applied.with_warning(
                            WarningKind::Tolerated,
                            format!(
                                "ACTIVITY_DELTA: the patch for '{}' made its content {}, which is not an object; the content is now empty",
                                e.message_id,
                                kind_of(&other)
                            ),
                        );
                        Map::new()
                    }
                };
                activity.activity_type.clone_from(&e.activity_type);
                // The patched message is a new object in the reference client.
                self.lookup.aliases.detach(at);
                applied
            }
            Err(error) => {
                // A failed patch leaves the document as it was.
                if let Value::Object(content) = doc {
                    activity.content = content;
                }
                Applied::messages_if(merged).with_warning(
                    WarningKind::ActivityPatchFailed,
                    format!(
                        "Failed to apply activity patch for '{}': {error}",
                        e.message_id
                    ),
                )
            }
        }
    }

    fn run_started(&mut self, e: &RunStartedEvent) -> Applied {
        self.tally = ToolCallTally::default();
        self.thread_id = Some(e.thread_id.clone());
        self.run_id = Some(e.run_id.clone());
        self.last_run = None;
        let Some(input) = &e.input else {
            return Applied::default();
        };
        for message in &input.messages {
            if self.lookup.message(&self.messages, message.id()).is_none() {
                self.push(message.clone());
            }
        }
        Applied::messages()
    }

    fn run_finished(&mut self, e: &RunFinishedEvent) {
        let outcome = e.outcome.clone().unwrap_or(RunFinishedOutcome::Success {
            pending_tool_call_ids: None,
        });
        match &outcome {
            RunFinishedOutcome::Success {
                pending_tool_call_ids,
            } => {
                self.result.clone_from(&e.result);
                self.pending_tool_call_ids = match pending_tool_call_ids {
                    // A producer that names the pending calls is trusted over the tally.
                    Some(named) if !named.is_empty() => named.clone(),
                    _ => self.tally.unanswered(),
                };
                self.pending_interrupts.clear();
            }
            RunFinishedOutcome::Interrupt { interrupts } => {
                self.pending_tool_call_ids.clear();
                self.pending_interrupts.clone_from(interrupts);
            }
            RunFinishedOutcome::Cancelled => {
                self.pending_tool_call_ids.clear();
                self.pending_interrupts.clear();
            }
        }
        self.last_run = Some(RunEnd::Finished {
            outcome,
            usage: e.usage.clone(),
        });
    }

    fn encrypted_value(&mut self, e: &ReasoningEncryptedValueEvent) -> Applied {
        // The event attaches to an entity that already exists; it builds none,
        // so its metadata stays on the event. A 1.1 event states the payload's
        // type or, by leaving it out, that the payload has none.
        let set = |value: &mut Option<String>, kind: &mut Option<String>| {
            *value = Some(e.encrypted_value.clone());
            kind.clone_from(&e.encrypted_value_type);
        };
        let id = &e.entity_id;
        match e.subtype {
            EncryptedValueSubtype::ToolCall => {
                let Some((at, call)) = self.lookup.tool_call(&self.messages, id) else {
                    return Applied::warn(
                        WarningKind::MissingTarget,
                        format!("REASONING_ENCRYPTED_VALUE: No tool call found with ID '{id}'"),
                    );
                };
                if let Some(call) = tool_call_mut(&mut self.messages[at], call) {
                    set(&mut call.encrypted_value, &mut call.encrypted_value_type);
                }
                self.changed(at);
            }
            EncryptedValueSubtype::Message => {
                let Some(at) = self.lookup.message(&self.messages, id) else {
                    return Applied::warn(
                        WarningKind::MissingTarget,
                        format!("REASONING_ENCRYPTED_VALUE: No message found with ID '{id}'"),
                    );
                };
                let Some((value, kind)) = self.messages[at].encrypted_slots() else {
                    return Applied::warn(
                        WarningKind::Tolerated,
                        format!(
                            "REASONING_ENCRYPTED_VALUE: Message '{id}' is an activity message, which carries no encrypted value"
                        ),
                    );
                };
                set(value, kind);
                self.changed(at);
            }
        }
        Applied::messages()
    }

    /// Mirrors an in-place edit of the message at `at` to the places that hold
    /// the same object in the reference client.
    fn changed(&mut self, at: usize) {
        let others = self.lookup.aliases.others(at);
        if let Some((last, rest)) = others.split_last() {
            let message = self.messages[at].clone();
            for &other in rest {
                self.messages[other].clone_from(&message);
            }
            self.messages[*last] = message;
        }
    }

    fn push(&mut self, message: Message) {
        self.lookup.add(&message, self.messages.len());
        self.lookup.aliases.push();
        self.messages.push(message);
    }

    fn insert(&mut self, at: usize, message: Message) {
        if at == self.messages.len() {
            self.push(message);
        } else {
            self.lookup.shift_from(at);
            self.lookup.add(&message, at);
            self.lookup.aliases.insert(at);
            self.messages.insert(at, message);
        }
    }

    fn replace(&mut self, at: usize, message: Message) {
        self.lookup.aliases.detach(at);
        let old = std::mem::replace(&mut self.messages[at], message);
        if has_tool_calls(&old)
            || has_tool_calls(&self.messages[at])
            || old.id() != self.messages[at].id()
        {
            self.lookup.invalidate();
        }
    }
}

/// Which family of streamed message an event belongs to, for warning texts.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Text,
    Reasoning,
}

impl Stream {
    fn prefix(self) -> &'static str {
        match self {
            Stream::Text => "TEXT_MESSAGE",
            Stream::Reasoning => "REASONING_MESSAGE",
        }
    }

    fn missing(self, phase: &str, id: &str) -> String {
        format!("{}_{phase}: No message found with ID '{id}'", self.prefix())
    }

    fn activity_clash(self, phase: &str, id: &str) -> String {
        let kind = match self {
            Stream::Text => "text",
            Stream::Reasoning => "reasoning",
        };
        format!(
            "{}_{phase}: Message '{id}' is an activity message — message ids must be unique across activity and {kind} messages",
            self.prefix()
        )
    }
}

/// Which activity types a `MESSAGES_SNAPSHOT` declares it owns, read from
/// `metadata["@ag-ui/client"].authoritativeActivityTypes` the way the reference
/// client reads it.
#[derive(Debug)]
enum ActivityAuthority {
    /// No declaration: the snapshot owns all activity if it carries any.
    Inferred,
    /// `null`: the snapshot owns every activity type, even carrying none.
    All,
    /// A list (or an unreadable declaration, which owns nothing).
    Only(Vec<String>),
}

impl ActivityAuthority {
    fn of(metadata: Option<&Metadata>) -> Self {
        let Some(declaration) = metadata.and_then(|m| m.get(ACTIVITY_HISTORY_METADATA)) else {
            return Self::Inferred;
        };
        let Value::Object(declaration) = declaration else {
            return Self::Only(Vec::new());
        };
        match declaration.get("authoritativeActivityTypes") {
            None => Self::Inferred,
            Some(Value::Null) => Self::All,
            Some(Value::Array(types)) => Self::Only(
                types
                    .iter()
                    .map(|t| t.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .unwrap_or_default(),
            ),
            Some(_) => Self::Only(Vec::new()),
        }
    }
}

/// Tool calls the current run started, and those it answered, in start order.
#[derive(Debug, Clone, Default, PartialEq)]
struct ToolCallTally {
    started: Vec<String>,
    started_set: HashSet<String>,
    answered: HashSet<String>,
}

impl ToolCallTally {
    fn start(&mut self, id: &str) {
        if self.started_set.insert(id.to_owned()) {
            self.started.push(id.to_owned());
        }
    }

    fn answer(&mut self, id: &str) {
        self.answered.insert(id.to_owned());
    }

    fn unanswered(&self) -> Vec<String> {
        self.started
            .iter()
            .filter(|id| !self.answered.contains(*id))
            .cloned()
            .collect()
    }
}

/// Where each message id and tool-call id first occurs in the message list, so
/// that a streamed delta finds its target without scanning the conversation,
/// and which messages are one object in the reference client.
///
/// The reference client looks targets up with `find`, so the *first* message
/// with an id (and the first assistant message carrying a call) is the one
/// that counts; the maps keep first occurrences. Every hit is checked against
/// the list before it is trusted, and the list's length and buffer address are
/// remembered, so edits made to [`Session::messages`] between calls are noticed.
#[derive(Clone, Default)]
struct Lookup {
    messages: HashMap<String, usize>,
    tool_calls: HashMap<String, usize>,
    /// The maps no longer describe the list and must be rebuilt before use.
    dirty: bool,
    /// Length and buffer address of the list as this session last left it.
    fingerprint: Option<(usize, usize)>,
    aliases: Aliases,
}

impl fmt::Debug for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lookup")
            .field("messages", &self.messages.len())
            .field("tool_calls", &self.tool_calls.len())
            .field("shared_objects", &self.aliases.shared.len())
            .finish()
    }
}

/// Bookkeeping, not content: two sessions holding the same messages are equal
/// however their lookups were built.
impl PartialEq for Lookup {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

fn stamp_of(messages: &[Message]) -> (usize, usize) {
    (messages.len(), messages.as_ptr() as usize)
}

impl Lookup {
    /// Starts over for `messages`, every message its own object.
    fn reset(&mut self, messages: &[Message]) {
        self.dirty = true;
        self.aliases.reset(messages.len());
        self.stamp(messages);
    }

    fn rebuild(&mut self, messages: &[Message]) {
        self.messages.clear();
        self.tool_calls.clear();
        for (at, message) in messages.iter().enumerate() {
            self.add(message, at);
        }
        self.dirty = false;
    }

    fn ensure(&mut self, messages: &[Message]) {
        if self.dirty {
            self.rebuild(messages);
        }
    }

    fn stamp(&mut self, messages: &[Message]) {
        self.fingerprint = Some(stamp_of(messages));
    }

    /// Notices a list edited (or replaced) since this session last touched it.
    fn sync(&mut self, messages: &[Message]) {
        if self.fingerprint != Some(stamp_of(messages)) || self.aliases.of.len() != messages.len() {
            self.reset(messages);
        }
    }

    fn invalidate(&mut self) {
        self.dirty = true;
    }

    /// Records `message` at `at`, unless an earlier message already holds its ids.
    fn add(&mut self, message: &Message, at: usize) {
        keep_first(&mut self.messages, message.id(), at);
        if let Message::Assistant(m) = message {
            for call in m.tool_calls.iter().flatten() {
                keep_first(&mut self.tool_calls, &call.id, at);
            }
        }
    }

    fn add_tool_call(&mut self, id: &str, at: usize) {
        keep_first(&mut self.tool_calls, id, at);
    }

    /// Makes room for a message inserted at `at`.
    fn shift_from(&mut self, at: usize) {
        for position in self
            .messages
            .values_mut()
            .chain(self.tool_calls.values_mut())
        {
            if *position >= at {
                *position += 1;
            }
        }
    }

    /// The first message with `id`.
    fn message(&mut self, messages: &[Message], id: &str) -> Option<usize> {
        self.ensure(messages);
        let found = self.messages.get(id).copied();
        match found {
            Some(at) if messages.get(at).is_some_and(|m| m.id() == id) => Some(at),
            None => None,
            Some(_) => {
                self.rebuild(messages);
                self.messages.get(id).copied()
            }
        }
    }

    /// The first assistant message carrying the call `id`, and the call's
    /// position in it.
    fn tool_call(&mut self, messages: &[Message], id: &str) -> Option<(usize, usize)> {
        self.ensure(messages);
        let locate = |at: usize| match messages.get(at) {
            Some(Message::Assistant(m)) => m
                .tool_calls
                .iter()
                .flatten()
                .position(|call| call.id == id)
                .map(|call| (at, call)),
            _ => None,
        };
        let found = self.tool_calls.get(id).copied()?;
        locate(found).or_else(|| {
            self.rebuild(messages);
            self.tool_calls.get(id).copied().and_then(locate)
        })
    }
}

/// Which positions of the list hold one and the same object in the reference
/// client.
///
/// A `MESSAGES_SNAPSHOT` replaces every message with a given id by the
/// snapshot's message for that id, and when the list held that id more than
/// once, the reference client puts the *same* object in each place: an edit
/// made later through the first of them shows in all. Only such snapshots
/// share objects, and a position stops sharing when it is given a new message.
#[derive(Debug, Clone, Default)]
struct Aliases {
    /// The object at each position.
    of: Vec<u64>,
    next: u64,
    /// Objects held at more than one position, with how many.
    shared: HashMap<u64, usize>,
}

impl Aliases {
    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn reset(&mut self, len: usize) {
        self.shared.clear();
        self.of.clear();
        for _ in 0..len {
            let object = self.fresh();
            self.of.push(object);
        }
    }

    fn push(&mut self) {
        let object = self.fresh();
        self.of.push(object);
    }

    fn insert(&mut self, at: usize) {
        let object = self.fresh();
        self.of.insert(at.min(self.of.len()), object);
    }

    /// Gives position `at` an object of its own.
    fn detach(&mut self, at: usize) {
        let Some(object) = self.of.get(at).copied() else {
            return;
        };
        if let Some(count) = self.shared.get_mut(&object) {
            *count -= 1;
            if *count < 2 {
                self.shared.remove(&object);
            }
        }
        let fresh = self.fresh();
        self.of[at] = fresh;
    }

    /// The other positions holding the object at `at`.
    fn others(&self, at: usize) -> Vec<usize> {
        match self.of.get(at) {
            Some(object) if self.shared.contains_key(object) => (0..self.of.len())
                .filter(|&q| q != at && self.of[q] == *object)
                .collect(),
            _ => Vec::new(),
        }
    }

    fn set(&mut self, of: Vec<u64>) {
        self.shared.clear();
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for object in &of {
            *counts.entry(*object).or_default() += 1;
        }
        self.shared
            .extend(counts.into_iter().filter(|(_, count)| *count > 1));
        self.of = of;
    }
}

fn keep_first(map: &mut HashMap<String, usize>, id: &str, at: usize) {
    match map.get_mut(id) {
        Some(existing) if *existing <= at => {}
        Some(existing) => *existing = at,
        None => {
            map.insert(id.to_owned(), at);
        }
    }
}

fn tool_call_mut(message: &mut Message, call: usize) -> Option<&mut ToolCall> {
    match message {
        Message::Assistant(m) => m.tool_calls.as_mut()?.get_mut(call),
        _ => None,
    }
}

fn has_tool_calls(message: &Message) -> bool {
    matches!(message, Message::Assistant(m) if m.tool_calls.as_ref().is_some_and(|c| !c.is_empty()))
}

/// Folds `incoming` into `target` key by key, the last write winning and never
/// recursing. Returns whether the event carried metadata at all: an empty
/// object still counts (and still creates an empty `metadata` on the target),
/// as in the reference client.
pub(crate) fn merge_metadata(target: &mut Option<Metadata>, incoming: Option<&Metadata>) -> bool {
    let Some(incoming) = incoming else {
        return false;
    };
    let target = target.get_or_insert_with(Map::new);
    for (key, value) in incoming {
        target.insert(key.clone(), value.clone());
    }
    true
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
