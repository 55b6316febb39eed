//! The event-sequence verifier: the stream state machine of AG-UI 1.1 §4.3.
//!
//! The judge is the reference consumer, `@ag-ui/client` 1.0.0: a stream it rejects is
//! rejected here at the same event with a byte-identical message, and a stream it accepts
//! is accepted. [`Verifier::for_thread`] adds the one rule of later revisions of that
//! client that the consumer pipeline relies on: every run stays on the input's thread.

mod entities;
mod registry;
mod run;
mod steps;
mod subagents;

use std::collections::HashMap;

use crate::event::{Event, EventType};

use registry::{MESSAGE, ONLY, Registry, SPAN};

/// An event the protocol does not allow at this point of the stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct VerifyError {
    /// The reference client's exact message.
    pub message: String,
}

fn fail<T>(message: String) -> Result<T, VerifyError> {
    Err(VerifyError { message })
}

/// Who produced an entity: `None` is the parent agent, `Some(id)` a subagent invocation.
/// The empty string is a legal subagent id and is *not* the parent.
type Owner = Option<String>;

/// How the reference client names an owner in its messages.
fn owner_label(owner: Option<&str>) -> &str {
    owner.unwrap_or("(the parent agent)")
}

/// An opener's owner disagreeing with a tagged continuation. An untagged event never
/// disagrees (absent means "whoever owns the surrounding entity"), and an entity with
/// nothing on record has no opener to disagree with.
fn check_owner(
    ty: EventType,
    tag: Option<&str>,
    owner: Option<Option<&str>>,
    kind: &str,
    id: &str,
) -> Result<(), VerifyError> {
    match (tag, owner) {
        (Some(tag), Some(owner)) if owner != Some(tag) => fail(format!(
            "Cannot send '{ty}': subagentRunId '{tag}' does not match the {kind} '{id}' opener's subagent '{}'.",
            owner_label(owner)
        )),
        _ => Ok(()),
    }
}

/// The steps one owner has open, in the order they were started.
#[derive(Debug, Clone)]
struct StepGroup {
    owner: Owner,
    open: Vec<String>,
}

/// Where a subagent invocation is in the current run.
#[derive(Debug, Clone, Copy)]
enum Subagent {
    /// Started, with the sequence number of its `SUBAGENT_STARTED`.
    Active(u64),
    /// Finished or errored; its id cannot be started again in this run.
    Closed,
}

/// The stream state machine of AG-UI 1.1 §4.3.
///
/// Feed it every event of a stream, in order, after chunk expansion. The first `Err` is
/// where the stream became invalid; the reference client stops the run there. The state
/// after an `Err` is unspecified, and later calls may fail again.
///
/// A stream may carry several runs: a `RUN_STARTED` after a `RUN_FINISHED` or `RUN_ERROR`
/// begins a new run and forgets everything tracked for the previous one. `RUN_ERROR` is
/// accepted as the first event, during a run, and once after `RUN_FINISHED`.
#[derive(Debug, Clone, Default)]
pub struct Verifier {
    /// The input's thread id when seeded; also switches on the thread-identity rule.
    thread_id: Option<String>,
    first_event_seen: bool,
    run_started: bool,
    run_finished: bool,
    run_errored: bool,
    /// The runId of the last `RUN_STARTED`, named when a seeded verifier rejects its
    /// `RUN_FINISHED`.
    open_run_id: String,
    /// Orders openers, so that open ids are reported oldest first.
    seq: u64,
    messages: Registry<1>,
    tool_calls: Registry<1>,
    /// Spans and reasoning messages are open independently (one id may name both), but
    /// share one owner so that a span and the message inside it cannot disagree.
    reasoning: Registry<2>,
    /// Activities have no close event: an entry only says who owns it.
    activities: HashMap<String, Owner>,
    /// Step names are unique per owner, not per stream. A group outlives its last open
    /// step because the reference client lists (and searches) owners in the order each
    /// first started a step in the run.
    steps: Vec<StepGroup>,
    subagents: HashMap<String, Subagent>,
    active_subagents: usize,
}

impl Verifier {
    /// A verifier that knows nothing about the stream yet; it behaves exactly as
    /// `@ag-ui/client` 1.0.0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Seeded with the input's thread id, as the official client seeds it: a RUN_STARTED (or
    /// RUN_FINISHED/RUN_ERROR carrying ids) on another thread is rejected.
    ///
    /// This is the one rule a seeded verifier adds to [`Verifier::new`]: every run's
    /// boundary events carry the seeded thread id. `@ag-ui/client` 1.0.0 does not seed its
    /// verifier and checks no identity at all (the rule comes from later revisions of the
    /// official client), so on a stream that names another thread a seeded verifier is
    /// stricter than that judge. `RUN_ERROR` carries no ids in this model and is never
    /// rejected on identity. The other later identity rules (a `RUN_FINISHED` naming the
    /// runId of its `RUN_STARTED`, distinct interrupt ids in an interrupt outcome) are not
    /// enforced, because 1.0.0 accepts what they reject.
    pub fn for_thread(thread_id: impl Into<String>) -> Self {
        Self {
            thread_id: Some(thread_id.into()),
            ..Self::default()
        }
    }

    /// Checks one event (already chunk-expanded; unknown events never reach it). Err = the stream
    /// is invalid at this event; the caller stops. After an Err, further calls may return Err again.
    ///
    /// An [`Event::Unknown`] is accepted and changes nothing. A `*_CHUNK` event is held to
    /// the run-boundary rules and otherwise passes, as in the reference client.
    pub fn verify(&mut self, event: &Event) -> Result<(), VerifyError> {
        let Some(ty) = event.event_type() else {
            return Ok(());
        };
        self.check_run_boundary(ty)?;
        match event {
            Event::TextMessageStart(e) => {
                let (id, tag) = (e.message_id.as_str(), e.subagent_run_id.as_deref());
                if self.messages.is_open(id, ONLY) {
                    return fail(format!(
                        "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '{id}' is already in progress. Complete it with 'TEXT_MESSAGE_END' first."
                    ));
                }
                check_owner(ty, tag, self.messages.owner(id), "message", id)?;
                let seq = self.next_seq();
                self.messages.open(id, ONLY, seq, tag);
                Ok(())
            }
            Event::TextMessageContent(e) => self.continue_text(
                ty,
                &e.message_id,
                e.subagent_run_id.as_deref(),
                "Start a text message with 'TEXT_MESSAGE_START' first.",
            ),
            Event::TextMessageEnd(e) => {
                let id = e.message_id.as_str();
                self.continue_text(
                    ty,
                    id,
                    e.subagent_run_id.as_deref(),
                    "A 'TEXT_MESSAGE_START' event must be sent first.",
                )?;
                self.messages.close(id, ONLY);
                Ok(())
            }
            Event::ToolCallStart(e) => self.start_tool_call(e),
            Event::ToolCallArgs(e) => self.continue_tool_call(
                ty,
                &e.tool_call_id,
                e.subagent_run_id.as_deref(),
                "Start a tool call with 'TOOL_CALL_START' first.",
            ),
            Event::ToolCallEnd(e) => {
                let id = e.tool_call_id.as_str();
                self.continue_tool_call(
                    ty,
                    id,
                    e.subagent_run_id.as_deref(),
                    "A 'TOOL_CALL_START' event must be sent first.",
                )?;
                self.tool_calls.close(id, ONLY);
                Ok(())
            }
            Event::ToolCallResult(e) => {
                // The result mints a tool message, and its executor may differ from the
                // caller, so the newest mint owns the id.
                self.messages
                    .record_owner(&e.message_id, e.subagent_run_id.as_deref(), true);
                Ok(())
            }
            Event::StepStarted(e) => self.start_step(&e.step_name, e.subagent_run_id.as_deref()),
            Event::StepFinished(e) => self.finish_step(&e.step_name, e.subagent_run_id.as_deref()),
            Event::ReasoningStart(e) => {
                self.open_reasoning(SPAN, &e.message_id, e.subagent_run_id.as_deref())
            }
            Event::ReasoningMessageStart(e) => {
                self.open_reasoning(MESSAGE, &e.message_id, e.subagent_run_id.as_deref())
            }
            Event::ReasoningMessageContent(e) => {
                self.continue_reasoning(ty, MESSAGE, &e.message_id, e.subagent_run_id.as_deref())
            }
            Event::ReasoningMessageEnd(e) => {
                let id = e.message_id.as_str();
                self.continue_reasoning(ty, MESSAGE, id, e.subagent_run_id.as_deref())?;
                self.reasoning.close(id, MESSAGE);
                Ok(())
            }
            Event::ReasoningEnd(e) => {
                let id = e.message_id.as_str();
                self.continue_reasoning(ty, SPAN, id, e.subagent_run_id.as_deref())?;
                self.reasoning.close(id, SPAN);
                Ok(())
            }
            Event::ReasoningEncryptedValue(e) => self.check_encrypted_value(ty, e),
            Event::ActivitySnapshot(e) => {
                self.record_activity(e);
                Ok(())
            }
            Event::ActivityDelta(e) => {
                let id = e.message_id.as_str();
                let owner = self.activities.get(id).map(Option::as_deref);
                check_owner(ty, e.subagent_run_id.as_deref(), owner, "activity", id)
            }
            Event::SubagentStarted(e) => self.start_subagent(e),
            Event::SubagentFinished(e) => self.close_subagent(ty, &e.subagent_run_id),
            Event::SubagentError(e) => self.close_subagent(ty, &e.subagent_run_id),
            Event::MessagesSnapshot(e) => {
                // The snapshot restates the conversation and replaces each message, so its
                // owners replace the recorded ones.
                self.seed_owners(&e.messages, true);
                Ok(())
            }
            Event::RunStarted(e) => self.start_run(e),
            Event::RunFinished(e) => self.finish_run(e),
            Event::RunError(_) => {
                self.run_errored = true;
                Ok(())
            }
            // State events carry attribution as provenance only; chunks are expanded before
            // verification; the rest are not sequence-checked.
            Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_)
            | Event::StateSnapshot(_)
            | Event::StateDelta(_)
            | Event::Raw(_)
            | Event::Custom(_)
            | Event::Unknown(_) => Ok(()),
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}

#[cfg(test)]
mod tests;
