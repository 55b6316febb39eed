//! Text messages, tool calls and reasoning, opened, continued and closed by their own
//! events; and the events that only put an owner on record or are checked against one.

use super::registry::{ONLY, SPAN};
use super::{Verifier, VerifyError, check_owner, fail, owner_label};
use crate::event::{
    ActivitySnapshotEvent, EncryptedValueSubtype, EventType, ReasoningEncryptedValueEvent,
    ToolCallStartEvent,
};
use crate::message::Message;

impl Verifier {
    pub(super) fn continue_text(
        &self,
        ty: EventType,
        id: &str,
        tag: Option<&str>,
        remedy: &str,
    ) -> Result<(), VerifyError> {
        let Some(owner) = self.messages.open_owner(id, ONLY) else {
            return fail(format!(
                "Cannot send '{ty}' event: No active text message found with ID '{id}'. {remedy}"
            ));
        };
        check_owner(ty, tag, Some(owner), "message", id)
    }

    pub(super) fn start_tool_call(&mut self, e: &ToolCallStartEvent) -> Result<(), VerifyError> {
        let ty = EventType::ToolCallStart;
        let (id, tag) = (e.tool_call_id.as_str(), e.subagent_run_id.as_deref());
        if self.tool_calls.is_open(id, ONLY) {
            return fail(format!(
                "Cannot send 'TOOL_CALL_START' event: A tool call with ID '{id}' is already in progress. Complete it with 'TOOL_CALL_END' first."
            ));
        }
        // A tool call lives inside the message that carries it and has no attribution of
        // its own there, so it cannot belong to anyone but that message's owner; untagged,
        // it inherits that owner.
        let mut inherited: Option<(&str, Option<&str>)> = None;
        if let Some(parent) = e.parent_message_id.as_deref()
            && let Some(parent_owner) = self.messages.owner(parent)
        {
            if let Some(tag) = tag
                && parent_owner != Some(tag)
            {
                return fail(format!(
                    "Cannot send 'TOOL_CALL_START': subagentRunId '{tag}' does not match its parent message '{parent}' owner '{}'. A tool call belongs to the message that carries it.",
                    owner_label(parent_owner)
                ));
            }
            inherited = Some((parent, parent_owner));
        }
        if let Some(existing) = self.tool_calls.owner(id) {
            check_owner(ty, tag, Some(existing), "tool call", id)?;
            // An untagged reopen under a parent owned by someone else would leave the call
            // inside its first parent while the new parent gets nothing.
            if tag.is_none()
                && let Some((parent, parent_owner)) = inherited
                && parent_owner != existing
            {
                return fail(format!(
                    "Cannot send 'TOOL_CALL_START': tool call '{id}' is owned by '{}' but its parent message '{parent}' is owned by '{}'. A tool call belongs to the message that carries it.",
                    owner_label(existing),
                    owner_label(parent_owner)
                ));
            }
        }
        self.seq += 1;
        let owner = tag.or(inherited.and_then(|(_, owner)| owner));
        self.tool_calls.open(id, ONLY, self.seq, owner);
        Ok(())
    }

    pub(super) fn continue_tool_call(
        &self,
        ty: EventType,
        id: &str,
        tag: Option<&str>,
        remedy: &str,
    ) -> Result<(), VerifyError> {
        let Some(owner) = self.tool_calls.open_owner(id, ONLY) else {
            return fail(format!(
                "Cannot send '{ty}' event: No active tool call found with ID '{id}'. {remedy}"
            ));
        };
        check_owner(ty, tag, Some(owner), "tool call", id)
    }

    pub(super) fn open_reasoning(
        &mut self,
        lane: usize,
        id: &str,
        tag: Option<&str>,
    ) -> Result<(), VerifyError> {
        let ty = if lane == SPAN {
            EventType::ReasoningStart
        } else {
            EventType::ReasoningMessageStart
        };
        if self.reasoning.is_open(id, lane) {
            return fail(if lane == SPAN {
                format!(
                    "Cannot send 'REASONING_START' event: A reasoning span with ID '{id}' is already in progress. Complete it with 'REASONING_END' first."
                )
            } else {
                format!(
                    "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID '{id}' is already in progress. Complete it with 'REASONING_MESSAGE_END' first."
                )
            });
        }
        check_owner(ty, tag, self.reasoning.owner(id), "reasoning message", id)?;
        let seq = self.next_seq();
        self.reasoning.open(id, lane, seq, tag);
        Ok(())
    }

    pub(super) fn continue_reasoning(
        &self,
        ty: EventType,
        lane: usize,
        id: &str,
        tag: Option<&str>,
    ) -> Result<(), VerifyError> {
        let Some(owner) = self.reasoning.open_owner(id, lane) else {
            return fail(if lane == SPAN {
                format!(
                    "Cannot send 'REASONING_END' event: No active reasoning span found with ID '{id}'. A 'REASONING_START' event must be sent first."
                )
            } else {
                format!(
                    "Cannot send '{ty}' event: No active reasoning message found with ID '{id}'. Start a reasoning message with 'REASONING_MESSAGE_START' first."
                )
            });
        };
        check_owner(ty, tag, Some(owner), "reasoning message", id)
    }

    /// An encrypted value opens and closes nothing; it only must not disagree with the
    /// owner of the entity its subtype names. A "message" may be a text or a reasoning
    /// message, and ids are unique per kind, so the first found is the owner.
    pub(super) fn check_encrypted_value(
        &self,
        ty: EventType,
        e: &ReasoningEncryptedValueEvent,
    ) -> Result<(), VerifyError> {
        let id = e.entity_id.as_str();
        let (owner, kind) = match e.subtype {
            EncryptedValueSubtype::ToolCall => (self.tool_calls.owner(id), "tool call"),
            EncryptedValueSubtype::Message => (
                self.messages.owner(id).or_else(|| self.reasoning.owner(id)),
                "message",
            ),
        };
        check_owner(ty, e.subagent_run_id.as_deref(), owner, kind, id)
    }

    /// Only a replacing snapshot re-mints (and so re-owns) an existing activity; with
    /// `replace: false` the existing message, and its owner, stay.
    pub(super) fn record_activity(&mut self, e: &ActivitySnapshotEvent) {
        let owner = e.subagent_run_id.as_deref();
        match self.activities.get_mut(&e.message_id) {
            Some(recorded) => {
                if e.replace != Some(false) {
                    *recorded = owner.map(str::to_owned);
                }
            }
            None => {
                self.activities
                    .insert(e.message_id.clone(), owner.map(str::to_owned));
            }
        }
    }

    /// Replayed history puts ids on the wire that later events may continue, so their
    /// owners go on record like an opener's: each message under the kind its role streams
    /// as, and an assistant message's tool calls under the message's owner.
    pub(super) fn seed_owners(&mut self, messages: &[Message], replace: bool) {
        for message in messages {
            let (id, owner) = (message.id(), message.subagent_run_id());
            match message {
                Message::Reasoning(_) => self.reasoning.record_owner(id, owner, replace),
                Message::Activity(_) => match self.activities.get_mut(id) {
                    Some(recorded) => {
                        if replace {
                            *recorded = owner.map(str::to_owned);
                        }
                    }
                    None => {
                        self.activities
                            .insert(id.to_owned(), owner.map(str::to_owned));
                    }
                },
                _ => self.messages.record_owner(id, owner, replace),
            }
            if let Message::Assistant(assistant) = message {
                for call in assistant.tool_calls.iter().flatten() {
                    self.tool_calls.record_owner(&call.id, owner, replace);
                }
            }
        }
    }
}
