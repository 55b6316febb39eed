//! The event-sequence verifier: the stream state machine of AG-UI 1.1 §4.3.
//!
//! The judge is the reference consumer, `@ag-ui/client` 1.0.0: a stream it rejects is
//! rejected here at the same event with a byte-identical message, and a stream it accepts
//! is accepted. [`Verifier::for_thread`] adds the one rule of later revisions of that
//! client that the consumer pipeline relies on: every run stays on the input's thread.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::event::{
    ActivitySnapshotEvent, EncryptedValueSubtype, Event, EventType, ReasoningEncryptedValueEvent,
    RunFinishedEvent, RunStartedEvent, SubagentStartedEvent, ToolCallStartEvent,
};
use crate::message::Message;

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

/// The single open-lane of text messages and tool calls.
const ONLY: usize = 0;
/// Reasoning spans (`REASONING_START`/`REASONING_END`).
const SPAN: usize = 0;
/// Reasoning messages (`REASONING_MESSAGE_START`/`REASONING_MESSAGE_END`).
const MESSAGE: usize = 1;

/// One id of one entity kind: its owner, on record for the rest of the run once known,
/// and, per lane, the sequence number of the opener that made it open.
#[derive(Debug, Clone)]
struct Tracked<const LANES: usize> {
    owner: Owner,
    opened_at: [Option<u64>; LANES],
}

/// The ids of one entity kind seen in the current run.
///
/// Ownership and openness live in one map because they are keyed alike, which halves the
/// lookups and key allocations of an opener. Openness is a per-lane sequence number rather
/// than a flag so that the `RUN_FINISHED` report can list open ids in the order they were
/// (last) opened, as the reference client's insertion-ordered sets do, while the hot path
/// stays a single hash lookup.
#[derive(Debug, Clone)]
struct Registry<const LANES: usize> {
    ids: HashMap<String, Tracked<LANES>>,
    open_count: [usize; LANES],
}

impl<const LANES: usize> Default for Registry<LANES> {
    fn default() -> Self {
        Self {
            ids: HashMap::new(),
            open_count: [0; LANES],
        }
    }
}

impl<const LANES: usize> Registry<LANES> {
    fn is_open(&self, id: &str, lane: usize) -> bool {
        self.ids
            .get(id)
            .is_some_and(|t| t.opened_at[lane].is_some())
    }

    /// The owner of `id` if it is open on `lane`: a continuation's one lookup.
    fn open_owner(&self, id: &str, lane: usize) -> Option<Option<&str>> {
        self.ids
            .get(id)
            .filter(|t| t.opened_at[lane].is_some())
            .map(|t| t.owner.as_deref())
    }

    /// `None` when nothing is on record; `Some(None)` when the parent agent owns it.
    fn owner(&self, id: &str) -> Option<Option<&str>> {
        self.ids.get(id).map(|t| t.owner.as_deref())
    }

    /// Opens `id` on `lane`. The owner is recorded only for an id with none on record:
    /// the first writer keeps it, even across a close and an untagged reopen.
    fn open(&mut self, id: &str, lane: usize, seq: u64, owner: Option<&str>) {
        let tracked = match self.ids.get_mut(id) {
            Some(tracked) => tracked,
            None => self.ids.entry(id.to_owned()).or_insert(Tracked {
                owner: owner.map(str::to_owned),
                opened_at: [None; LANES],
            }),
        };
        if tracked.opened_at[lane].replace(seq).is_none() {
            self.open_count[lane] += 1;
        }
    }

    fn close(&mut self, id: &str, lane: usize) {
        if let Some(tracked) = self.ids.get_mut(id)
            && tracked.opened_at[lane].take().is_some()
        {
            self.open_count[lane] -= 1;
        }
    }

    /// Puts an owner on record without opening anything; `replace` overwrites one
    /// already there.
    fn record_owner(&mut self, id: &str, owner: Option<&str>, replace: bool) {
        match self.ids.get_mut(id) {
            Some(tracked) => {
                if replace {
                    tracked.owner = owner.map(str::to_owned);
                }
            }
            None => {
                self.ids.insert(
                    id.to_owned(),
                    Tracked {
                        owner: owner.map(str::to_owned),
                        opened_at: [None; LANES],
                    },
                );
            }
        }
    }

    fn any_open(&self, lane: usize) -> bool {
        self.open_count[lane] > 0
    }

    /// The open ids of `lane`, oldest opener first, joined as the reference client joins
    /// them. Only built for an error, so the sort is off the hot path.
    fn open_ids(&self, lane: usize) -> String {
        let mut open: Vec<(u64, &str)> = self
            .ids
            .iter()
            .filter_map(|(id, t)| t.opened_at[lane].map(|seq| (seq, id.as_str())))
            .collect();
        open.sort_unstable();
        let ids: Vec<&str> = open.into_iter().map(|(_, id)| id).collect();
        ids.join(", ")
    }

    fn clear(&mut self) {
        self.ids.clear();
        self.open_count = [0; LANES];
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

    /// The rules that depend only on where the stream is between runs; they fire before
    /// anything specific to the event.
    fn check_run_boundary(&mut self, ty: EventType) -> Result<(), VerifyError> {
        if self.run_errored && ty != EventType::RunStarted {
            return fail(format!(
                "Cannot send event type '{ty}': The run has already errored with 'RUN_ERROR'. No further events can be sent."
            ));
        }
        if self.run_finished && ty != EventType::RunError && ty != EventType::RunStarted {
            return fail(format!(
                "Cannot send event type '{ty}': The run has already finished with 'RUN_FINISHED'. Start a new run with 'RUN_STARTED'."
            ));
        }
        if !self.first_event_seen {
            self.first_event_seen = true;
            if ty != EventType::RunStarted && ty != EventType::RunError {
                return fail("First event must be 'RUN_STARTED'".to_owned());
            }
        } else if ty == EventType::RunStarted {
            if self.run_started && !self.run_finished && !self.run_errored {
                return fail("Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with 'RUN_FINISHED' before starting a new run.".to_owned());
            }
            if self.run_finished || self.run_errored {
                self.reset_run();
            }
        }
        Ok(())
    }

    /// Forgets the previous run: ids, owners, steps and subagents are all per run.
    fn reset_run(&mut self) {
        self.messages.clear();
        self.tool_calls.clear();
        self.reasoning.clear();
        self.activities.clear();
        self.steps.clear();
        self.subagents.clear();
        self.active_subagents = 0;
        self.run_finished = false;
        self.run_errored = false;
        self.run_started = true;
    }

    fn start_run(&mut self, e: &RunStartedEvent) -> Result<(), VerifyError> {
        if let Some(thread) = &self.thread_id
            && e.thread_id != *thread
        {
            return fail(format!(
                "Cannot send 'RUN_STARTED' with threadId '{}': this stream belongs to thread '{thread}'. Every run on a stream carries the input's threadId.",
                e.thread_id
            ));
        }
        self.run_started = true;
        self.open_run_id.clear();
        self.open_run_id.push_str(&e.run_id);
        // The input echo is replayed history: it claims only ids nothing has claimed yet.
        if let Some(input) = &e.input {
            self.seed_owners(&input.messages, false);
        }
        Ok(())
    }

    fn finish_run(&mut self, e: &RunFinishedEvent) -> Result<(), VerifyError> {
        if let Some(thread) = &self.thread_id
            && e.thread_id != *thread
        {
            return fail(format!(
                "Cannot send 'RUN_FINISHED' with threadId '{}': run '{}' was opened on thread '{thread}'. A run's boundary events carry the input's threadId.",
                e.thread_id, self.open_run_id
            ));
        }
        if self.steps.iter().any(|group| !group.open.is_empty()) {
            let mut open = String::new();
            for group in &self.steps {
                for name in &group.open {
                    if !open.is_empty() {
                        open.push_str(", ");
                    }
                    open.push_str(name);
                    if let Some(owner) = &group.owner {
                        let _ = write!(open, " (subagent '{owner}')");
                    }
                }
            }
            return fail(format!(
                "Cannot send 'RUN_FINISHED' while steps are still active: {open}"
            ));
        }
        if self.messages.any_open(ONLY) {
            return fail(format!(
                "Cannot send 'RUN_FINISHED' while text messages are still active: {}",
                self.messages.open_ids(ONLY)
            ));
        }
        if self.reasoning.any_open(MESSAGE) {
            return fail(format!(
                "Cannot send 'RUN_FINISHED' while reasoning messages are still active: {}",
                self.reasoning.open_ids(MESSAGE)
            ));
        }
        if self.reasoning.any_open(SPAN) {
            return fail(format!(
                "Cannot send 'RUN_FINISHED' while reasoning spans are still active: {}",
                self.reasoning.open_ids(SPAN)
            ));
        }
        if self.tool_calls.any_open(ONLY) {
            return fail(format!(
                "Cannot send 'RUN_FINISHED' while tool calls are still active: {}",
                self.tool_calls.open_ids(ONLY)
            ));
        }
        if self.active_subagents > 0 {
            let mut active: Vec<(u64, &str)> = self
                .subagents
                .iter()
                .filter_map(|(id, state)| match state {
                    Subagent::Active(seq) => Some((*seq, id.as_str())),
                    Subagent::Closed => None,
                })
                .collect();
            active.sort_unstable();
            let ids: Vec<&str> = active.into_iter().map(|(_, id)| id).collect();
            return fail(format!(
                "Cannot send 'RUN_FINISHED' while subagents are still active: {}",
                ids.join(", ")
            ));
        }
        self.run_finished = true;
        Ok(())
    }

    fn continue_text(
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

    fn start_tool_call(&mut self, e: &ToolCallStartEvent) -> Result<(), VerifyError> {
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

    fn continue_tool_call(
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

    fn start_step(&mut self, name: &str, owner: Option<&str>) -> Result<(), VerifyError> {
        let group = match self.steps.iter().position(|g| g.owner.as_deref() == owner) {
            Some(i) => &mut self.steps[i],
            None => {
                // Most runs have one owner of steps, and one step open at
                // a time: room for what is there, as the verifier lives as
                // long as its run.
                if self.steps.capacity() == 0 {
                    self.steps.reserve_exact(1);
                }
                self.steps.push(StepGroup {
                    owner: owner.map(str::to_owned),
                    open: Vec::new(),
                });
                let last = self.steps.len() - 1;
                &mut self.steps[last]
            }
        };
        if group.open.iter().any(|open| open == name) {
            let mut message = format!("Step \"{name}\" is already active for 'STEP_STARTED'");
            if let Some(owner) = owner {
                let _ = write!(message, " in subagent '{owner}'");
            }
            return fail(message);
        }
        if group.open.capacity() == 0 {
            group.open.reserve_exact(1);
        }
        group.open.push(name.to_owned());
        Ok(())
    }

    fn finish_step(&mut self, name: &str, owner: Option<&str>) -> Result<(), VerifyError> {
        if let Some(group) = self.steps.iter_mut().find(|g| g.owner.as_deref() == owner)
            && let Some(i) = group.open.iter().position(|open| open == name)
        {
            group.open.remove(i);
            return Ok(());
        }
        // Finishing another owner's step is a far likelier mistake than finishing one that
        // never started, so it is named as such.
        if let Some(other) = self
            .steps
            .iter()
            .find(|g| g.owner.as_deref() != owner && g.open.iter().any(|open| open == name))
        {
            let who = |owner: Option<&str>| match owner {
                Some(id) => format!("subagent '{id}'"),
                None => "the parent agent".to_owned(),
            };
            return fail(format!(
                "Cannot send 'STEP_FINISHED' for step \"{name}\" attributed to {}: that step is open under {}. A step must be finished by whoever started it.",
                who(owner),
                who(other.owner.as_deref())
            ));
        }
        fail(format!(
            "Cannot send 'STEP_FINISHED' for step \"{name}\" that was not started"
        ))
    }

    fn open_reasoning(
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

    fn continue_reasoning(
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
    fn check_encrypted_value(
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
    fn record_activity(&mut self, e: &ActivitySnapshotEvent) {
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

    fn start_subagent(&mut self, e: &SubagentStartedEvent) -> Result<(), VerifyError> {
        let id = e.subagent_run_id.as_str();
        match self.subagents.get(id) {
            Some(Subagent::Active(_)) => {
                return fail(format!(
                    "Cannot send 'SUBAGENT_STARTED': subagent '{id}' is already active. Finish it with 'SUBAGENT_FINISHED' first."
                ));
            }
            // An id names one invocation, so it cannot have two starts and two terminals.
            Some(Subagent::Closed) => {
                return fail(format!(
                    "Cannot send 'SUBAGENT_STARTED': subagent '{id}' has already finished in this run. Subagent IDs are per-invocation and cannot be reused."
                ));
            }
            None => {}
        }
        if let Some(parent) = e.parent_subagent_run_id.as_deref()
            && !self.subagents.contains_key(parent)
        {
            return fail(format!(
                "Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{parent}' has not been started in this run."
            ));
        }
        let seq = self.next_seq();
        self.subagents.insert(id.to_owned(), Subagent::Active(seq));
        self.active_subagents += 1;
        Ok(())
    }

    fn close_subagent(&mut self, ty: EventType, id: &str) -> Result<(), VerifyError> {
        match self.subagents.get_mut(id) {
            Some(state @ Subagent::Active(_)) => {
                *state = Subagent::Closed;
                self.active_subagents -= 1;
                Ok(())
            }
            _ => fail(format!(
                "Cannot send '{ty}': no active subagent found with ID '{id}'. A 'SUBAGENT_STARTED' event must be sent first."
            )),
        }
    }

    /// Replayed history puts ids on the wire that later events may continue, so their
    /// owners go on record like an opener's: each message under the kind its role streams
    /// as, and an assistant message's tool calls under the message's owner.
    fn seed_owners(&mut self, messages: &[Message], replace: bool) {
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn event(value: &Value) -> Event {
        Event::from_value(value.clone())
            .unwrap_or_else(|e| panic!("test event does not decode: {e}: {value}"))
            .value
    }

    /// Where `verifier` first rejects `events`: `(index, message)`.
    fn run_with(mut verifier: Verifier, events: &[Value]) -> Result<(), (usize, String)> {
        for (i, value) in events.iter().enumerate() {
            verifier.verify(&event(value)).map_err(|e| (i, e.message))?;
        }
        Ok(())
    }

    fn accepts(events: &[Value]) {
        if let Err((i, message)) = run_with(Verifier::new(), events) {
            panic!("event {i} ({}) rejected: {message}", events[i]);
        }
    }

    /// The message the last event is rejected with; every earlier event must pass.
    fn rejects_last_with(verifier: Verifier, events: &[Value]) -> String {
        match run_with(verifier, events) {
            Ok(()) => panic!("stream accepted, expected a rejection of its last event"),
            Err((i, message)) => {
                assert_eq!(
                    i,
                    events.len() - 1,
                    "rejected early, at {}: {message}",
                    events[i]
                );
                message
            }
        }
    }

    fn rejects_last(events: &[Value]) -> String {
        rejects_last_with(Verifier::new(), events)
    }

    fn tagged(mut event: Value, tag: Option<&str>) -> Value {
        if let Some(tag) = tag {
            event["subagentRunId"] = json!(tag);
        }
        event
    }

    fn started(run: &str) -> Value {
        json!({"type": "RUN_STARTED", "threadId": "th", "runId": run})
    }

    fn finished(run: &str) -> Value {
        json!({"type": "RUN_FINISHED", "threadId": "th", "runId": run})
    }

    fn run_error() -> Value {
        json!({"type": "RUN_ERROR", "message": "failed"})
    }

    fn text_start(id: &str, tag: Option<&str>) -> Value {
        tagged(json!({"type": "TEXT_MESSAGE_START", "messageId": id}), tag)
    }

    fn text_content(id: &str, tag: Option<&str>) -> Value {
        tagged(
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": "x"}),
            tag,
        )
    }

    fn text_end(id: &str, tag: Option<&str>) -> Value {
        tagged(json!({"type": "TEXT_MESSAGE_END", "messageId": id}), tag)
    }

    fn tool_start(id: &str, parent: Option<&str>, tag: Option<&str>) -> Value {
        let mut event = json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": "f"});
        if let Some(parent) = parent {
            event["parentMessageId"] = json!(parent);
        }
        tagged(event, tag)
    }

    fn tool_args(id: &str, tag: Option<&str>) -> Value {
        tagged(
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": "{}"}),
            tag,
        )
    }

    fn tool_end(id: &str, tag: Option<&str>) -> Value {
        tagged(json!({"type": "TOOL_CALL_END", "toolCallId": id}), tag)
    }

    fn step(started: bool, name: &str, tag: Option<&str>) -> Value {
        let ty = if started {
            "STEP_STARTED"
        } else {
            "STEP_FINISHED"
        };
        tagged(json!({"type": ty, "stepName": name}), tag)
    }

    fn reasoning(ty: &str, id: &str, tag: Option<&str>) -> Value {
        let mut event = json!({"type": ty, "messageId": id});
        match ty {
            "REASONING_MESSAGE_START" => event["role"] = json!("reasoning"),
            "REASONING_MESSAGE_CONTENT" => event["delta"] = json!("hmm"),
            _ => {}
        }
        tagged(event, tag)
    }

    fn subagent_started(id: &str, parent: Option<&str>) -> Value {
        let mut event = json!({"type": "SUBAGENT_STARTED", "subagentRunId": id, "name": "helper"});
        if let Some(parent) = parent {
            event["parentSubagentRunId"] = json!(parent);
        }
        event
    }

    fn subagent_finished(id: &str) -> Value {
        json!({"type": "SUBAGENT_FINISHED", "subagentRunId": id})
    }

    fn subagent_error(id: &str) -> Value {
        json!({"type": "SUBAGENT_ERROR", "subagentRunId": id, "message": "boom"})
    }

    fn encrypted(subtype: &str, entity: &str, tag: Option<&str>) -> Value {
        tagged(
            json!({
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": subtype,
                "entityId": entity,
                "encryptedValue": "opaque",
            }),
            tag,
        )
    }

    fn activity_snapshot(id: &str, replace: Option<bool>, tag: Option<&str>) -> Value {
        let mut event = json!({
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": id,
            "activityType": "PLAN",
            "content": {},
        });
        if let Some(replace) = replace {
            event["replace"] = json!(replace);
        }
        tagged(event, tag)
    }

    fn activity_delta(id: &str, tag: Option<&str>) -> Value {
        tagged(
            json!({"type": "ACTIVITY_DELTA", "messageId": id, "activityType": "PLAN", "patch": []}),
            tag,
        )
    }

    fn user(id: &str, tag: Option<&str>) -> Value {
        tagged(json!({"id": id, "role": "user", "content": "hi"}), tag)
    }

    fn snapshot(messages: &Value) -> Value {
        json!({"type": "MESSAGES_SNAPSHOT", "messages": messages})
    }

    fn mismatch(ty: &str, tag: &str, kind: &str, id: &str, owner: &str) -> String {
        format!(
            "Cannot send '{ty}': subagentRunId '{tag}' does not match the {kind} '{id}' opener's subagent '{owner}'."
        )
    }

    const PARENT: &str = "(the parent agent)";

    // ---- run boundaries ----

    #[test]
    fn the_first_event_must_start_a_run() {
        assert_eq!(
            rejects_last(&[text_start("m1", None)]),
            "First event must be 'RUN_STARTED'"
        );
        // A chunk reaching the verifier is held to the same rule.
        assert_eq!(
            rejects_last(&[json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"})]),
            "First event must be 'RUN_STARTED'"
        );
        assert_eq!(
            rejects_last(&[finished("r1")]),
            "First event must be 'RUN_STARTED'"
        );
    }

    #[test]
    fn the_struct_api_works_without_json() {
        let mut verifier = Verifier::new();
        let start = Event::RunStarted(RunStartedEvent {
            thread_id: "th".into(),
            run_id: "r1".into(),
            parent_run_id: None,
            protocol_version: None,
            input: None,
            base: Default::default(),
        });
        let content = Event::TextMessageContent(crate::event::TextMessageContentEvent {
            message_id: "m1".into(),
            delta: "x".into(),
            subagent_run_id: None,
            base: Default::default(),
        });
        assert_eq!(verifier.verify(&start), Ok(()));
        assert_eq!(
            verifier.verify(&content).map_err(|e| e.to_string()),
            Err("Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'm1'. Start a text message with 'TEXT_MESSAGE_START' first.".to_owned())
        );
    }

    #[test]
    fn run_error_may_open_the_stream_and_a_run_may_follow() {
        accepts(&[run_error(), started("r1"), finished("r1")]);
        assert_eq!(
            rejects_last(&[run_error(), text_start("m1", None)]),
            "Cannot send event type 'TEXT_MESSAGE_START': The run has already errored with 'RUN_ERROR'. No further events can be sent."
        );
    }

    #[test]
    fn nothing_but_run_started_follows_run_error() {
        let errored = [started("r1"), text_start("m1", None), run_error()];
        for (next, ty) in [
            (text_content("m1", None), "TEXT_MESSAGE_CONTENT"),
            (finished("r1"), "RUN_FINISHED"),
            (run_error(), "RUN_ERROR"),
            (json!({"type": "CUSTOM", "name": "n", "value": 1}), "CUSTOM"),
        ] {
            let mut events = errored.to_vec();
            events.push(next);
            assert_eq!(
                rejects_last(&events),
                format!(
                    "Cannot send event type '{ty}': The run has already errored with 'RUN_ERROR'. No further events can be sent."
                )
            );
        }
        // RUN_ERROR abandons whatever was open: the next run starts clean.
        let mut events = errored.to_vec();
        events.extend([
            started("r2"),
            text_start("m1", None),
            text_end("m1", None),
            finished("r2"),
        ]);
        accepts(&events);
    }

    #[test]
    fn nothing_but_run_started_or_run_error_follows_run_finished() {
        for (next, ty) in [
            (json!({"type": "CUSTOM", "name": "n", "value": 1}), "CUSTOM"),
            (finished("r1"), "RUN_FINISHED"),
            (
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"}),
                "TEXT_MESSAGE_CHUNK",
            ),
            (subagent_started("s1", None), "SUBAGENT_STARTED"),
        ] {
            assert_eq!(
                rejects_last(&[started("r1"), finished("r1"), next]),
                format!(
                    "Cannot send event type '{ty}': The run has already finished with 'RUN_FINISHED'. Start a new run with 'RUN_STARTED'."
                )
            );
        }
    }

    #[test]
    fn a_late_run_error_is_accepted_once() {
        accepts(&[started("r1"), finished("r1"), run_error()]);
        assert_eq!(
            rejects_last(&[started("r1"), finished("r1"), run_error(), run_error()]),
            "Cannot send event type 'RUN_ERROR': The run has already errored with 'RUN_ERROR'. No further events can be sent."
        );
        accepts(&[
            started("r1"),
            finished("r1"),
            run_error(),
            started("r2"),
            finished("r2"),
        ]);
    }

    #[test]
    fn runs_do_not_nest() {
        let message = "Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with 'RUN_FINISHED' before starting a new run.";
        assert_eq!(rejects_last(&[started("r1"), started("r2")]), message);
        assert_eq!(
            rejects_last(&[started("r1"), finished("r1"), started("r2"), started("r3")]),
            message
        );
        assert_eq!(
            rejects_last(&[run_error(), started("r1"), started("r2")]),
            message
        );
    }

    #[test]
    fn a_new_run_forgets_the_previous_one() {
        accepts(&[
            started("r1"),
            text_start("m1", Some("A")),
            text_end("m1", Some("A")),
            tool_start("t1", None, Some("A")),
            tool_end("t1", None),
            subagent_started("s1", None),
            subagent_finished("s1"),
            activity_snapshot("a1", None, Some("A")),
            finished("r1"),
            // Owners, closed subagents and activities were all per run.
            started("r2"),
            text_start("m1", Some("B")),
            text_end("m1", None),
            tool_start("t1", None, Some("B")),
            tool_end("t1", Some("B")),
            subagent_started("s1", None),
            subagent_finished("s1"),
            activity_delta("a1", Some("B")),
            finished("r2"),
        ]);
    }

    #[test]
    fn unknown_events_pass_untouched() {
        let unknown = json!({"type": "SOMETHING_NEW", "x": 1});
        // Not counted as the first event...
        assert_eq!(
            rejects_last(&[unknown.clone(), text_start("m1", None)]),
            "First event must be 'RUN_STARTED'"
        );
        // ...and not held to the run boundaries.
        accepts(&[
            unknown.clone(),
            started("r1"),
            finished("r1"),
            unknown.clone(),
            run_error(),
            unknown,
        ]);
    }

    #[test]
    fn state_raw_custom_and_chunks_pass_inside_a_run() {
        accepts(&[
            started("r1"),
            json!({"type": "STATE_SNAPSHOT", "snapshot": null, "subagentRunId": "A"}),
            json!({"type": "STATE_DELTA", "delta": []}),
            json!({"type": "RAW", "event": {}}),
            json!({"type": "CUSTOM", "name": "n", "value": 1}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
            json!({"type": "TOOL_CALL_CHUNK", "delta": "x"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "delta": "x"}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "tm", "toolCallId": "never-started", "content": "42"}),
            finished("r1"),
        ]);
    }

    // ---- text messages and tool calls ----

    #[test]
    fn text_messages_open_and_close() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", None),
                text_start("m1", None)
            ]),
            "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID 'm1' is already in progress. Complete it with 'TEXT_MESSAGE_END' first."
        );
        assert_eq!(
            rejects_last(&[started("r1"), text_content("m1", None)]),
            "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'm1'. Start a text message with 'TEXT_MESSAGE_START' first."
        );
        assert_eq!(
            rejects_last(&[started("r1"), text_end("m1", None)]),
            "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID 'm1'. A 'TEXT_MESSAGE_START' event must be sent first."
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", None),
                text_end("m1", None),
                text_content("m1", None)
            ]),
            "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'm1'. Start a text message with 'TEXT_MESSAGE_START' first."
        );
    }

    #[test]
    fn a_closed_id_may_be_reopened() {
        accepts(&[
            started("r1"),
            text_start("m1", None),
            text_end("m1", None),
            text_start("m1", None),
            text_content("m1", None),
            text_end("m1", None),
            tool_start("t1", None, None),
            tool_end("t1", None),
            tool_start("t1", None, None),
            tool_end("t1", None),
            reasoning("REASONING_START", "r", None),
            reasoning("REASONING_END", "r", None),
            reasoning("REASONING_START", "r", None),
            reasoning("REASONING_END", "r", None),
            finished("r1"),
        ]);
    }

    #[test]
    fn tool_calls_open_and_close() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                tool_start("t1", None, None),
                tool_start("t1", None, None)
            ]),
            "Cannot send 'TOOL_CALL_START' event: A tool call with ID 't1' is already in progress. Complete it with 'TOOL_CALL_END' first."
        );
        assert_eq!(
            rejects_last(&[started("r1"), tool_args("t1", None)]),
            "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID 't1'. Start a tool call with 'TOOL_CALL_START' first."
        );
        assert_eq!(
            rejects_last(&[started("r1"), tool_end("t1", None)]),
            "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID 't1'. A 'TOOL_CALL_START' event must be sent first."
        );
    }

    #[test]
    fn messages_and_tool_calls_interleave() {
        accepts(&[
            started("r1"),
            text_start("m1", None),
            tool_start("t1", Some("m1"), None),
            text_content("m1", None),
            tool_args("t1", None),
            text_start("m2", None),
            text_end("m1", None),
            tool_end("t1", None),
            text_end("m2", None),
            finished("r1"),
        ]);
    }

    // ---- RUN_FINISHED with open items ----

    #[test]
    fn run_finished_reports_open_items_in_the_reference_order() {
        let mut events = vec![
            started("r1"),
            subagent_started("s1", None),
            tool_start("t1", None, None),
            reasoning("REASONING_START", "rs", None),
            reasoning("REASONING_MESSAGE_START", "rm", None),
            text_start("m1", None),
            step(true, "plan", None),
        ];
        let closers = [
            (
                step(false, "plan", None),
                "Cannot send 'RUN_FINISHED' while steps are still active: plan",
            ),
            (
                text_end("m1", None),
                "Cannot send 'RUN_FINISHED' while text messages are still active: m1",
            ),
            (
                reasoning("REASONING_MESSAGE_END", "rm", None),
                "Cannot send 'RUN_FINISHED' while reasoning messages are still active: rm",
            ),
            (
                reasoning("REASONING_END", "rs", None),
                "Cannot send 'RUN_FINISHED' while reasoning spans are still active: rs",
            ),
            (
                tool_end("t1", None),
                "Cannot send 'RUN_FINISHED' while tool calls are still active: t1",
            ),
            (
                subagent_finished("s1"),
                "Cannot send 'RUN_FINISHED' while subagents are still active: s1",
            ),
        ];
        for (closer, message) in closers {
            let mut attempt = events.clone();
            attempt.push(finished("r1"));
            assert_eq!(rejects_last(&attempt), message);
            events.push(closer);
        }
        events.push(finished("r1"));
        accepts(&events);
    }

    #[test]
    fn open_ids_are_listed_in_the_order_they_were_last_opened() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", None),
                text_start("m2", None),
                text_start("m3", None),
                text_end("m1", None),
                text_start("m1", None),
                finished("r1"),
            ]),
            "Cannot send 'RUN_FINISHED' while text messages are still active: m2, m3, m1"
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                tool_start("t2", None, None),
                tool_start("t1", None, None),
                finished("r1"),
            ]),
            "Cannot send 'RUN_FINISHED' while tool calls are still active: t2, t1"
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_MESSAGE_START", "b", None),
                reasoning("REASONING_MESSAGE_START", "a", None),
                finished("r1"),
            ]),
            "Cannot send 'RUN_FINISHED' while reasoning messages are still active: b, a"
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_START", "b", None),
                reasoning("REASONING_START", "a", None),
                finished("r1"),
            ]),
            "Cannot send 'RUN_FINISHED' while reasoning spans are still active: b, a"
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                subagent_started("B", None),
                subagent_started("A", None),
                subagent_started("", None),
                subagent_finished("A"),
                finished("r1"),
            ]),
            "Cannot send 'RUN_FINISHED' while subagents are still active: B, "
        );
    }

    #[test]
    fn open_steps_are_listed_per_owner_in_the_order_owners_first_started_one() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "plan", Some("A")),
                step(true, "tools", None),
                step(true, "plan", None),
                step(true, "x", Some("")),
                finished("r1"),
            ]),
            "Cannot send 'RUN_FINISHED' while steps are still active: plan (subagent 'A'), tools, plan, x (subagent '')"
        );
        // An owner keeps its place after its steps have all finished.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "a", Some("A")),
                step(false, "a", Some("A")),
                step(true, "b", None),
                step(true, "c", Some("A")),
                finished("r1"),
            ]),
            "Cannot send 'RUN_FINISHED' while steps are still active: c (subagent 'A'), b"
        );
        // Within an owner, a restarted step moves to the end.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "a", None),
                step(true, "b", None),
                step(false, "a", None),
                step(true, "a", None),
                finished("r1"),
            ]),
            "Cannot send 'RUN_FINISHED' while steps are still active: b, a"
        );
    }

    // ---- steps ----

    #[test]
    fn a_step_is_started_once_per_owner() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "plan", None),
                step(true, "plan", None)
            ]),
            "Step \"plan\" is already active for 'STEP_STARTED'"
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "plan", Some("A")),
                step(true, "plan", Some("A"))
            ]),
            "Step \"plan\" is already active for 'STEP_STARTED' in subagent 'A'"
        );
        // The same name under different owners is two steps; "" is not the parent.
        accepts(&[
            started("r1"),
            step(true, "tools", None),
            step(true, "tools", Some("A")),
            step(true, "tools", Some("")),
            step(false, "tools", Some("A")),
            step(false, "tools", Some("")),
            step(false, "tools", None),
            step(true, "tools", None),
            step(false, "tools", None),
            finished("r1"),
        ]);
    }

    #[test]
    fn a_step_is_finished_by_whoever_started_it() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "plan", None),
                step(false, "plan", Some("A"))
            ]),
            "Cannot send 'STEP_FINISHED' for step \"plan\" attributed to subagent 'A': that step is open under the parent agent. A step must be finished by whoever started it."
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "plan", Some("A")),
                step(false, "plan", None)
            ]),
            "Cannot send 'STEP_FINISHED' for step \"plan\" attributed to the parent agent: that step is open under subagent 'A'. A step must be finished by whoever started it."
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "plan", None),
                step(false, "plan", Some(""))
            ]),
            "Cannot send 'STEP_FINISHED' for step \"plan\" attributed to subagent '': that step is open under the parent agent. A step must be finished by whoever started it."
        );
        // The owner named is the first, in the order owners first started a step.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "other", Some("B")),
                step(true, "plan", Some("A")),
                step(true, "plan", Some("B")),
                step(false, "plan", Some("C"))
            ]),
            "Cannot send 'STEP_FINISHED' for step \"plan\" attributed to subagent 'C': that step is open under subagent 'B'. A step must be finished by whoever started it."
        );
    }

    #[test]
    fn a_step_must_be_started_before_it_finishes() {
        let message = "Cannot send 'STEP_FINISHED' for step \"plan\" that was not started";
        assert_eq!(
            rejects_last(&[started("r1"), step(false, "plan", None)]),
            message
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                step(true, "plan", Some("A")),
                step(false, "plan", Some("A")),
                step(false, "plan", None)
            ]),
            message
        );
    }

    // ---- reasoning ----

    #[test]
    fn reasoning_spans_and_messages_open_and_close_separately() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_START", "r", None),
                reasoning("REASONING_START", "r", None)
            ]),
            "Cannot send 'REASONING_START' event: A reasoning span with ID 'r' is already in progress. Complete it with 'REASONING_END' first."
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_MESSAGE_START", "r", None),
                reasoning("REASONING_MESSAGE_START", "r", None)
            ]),
            "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID 'r' is already in progress. Complete it with 'REASONING_MESSAGE_END' first."
        );
        assert_eq!(
            rejects_last(&[started("r1"), reasoning("REASONING_END", "r", None)]),
            "Cannot send 'REASONING_END' event: No active reasoning span found with ID 'r'. A 'REASONING_START' event must be sent first."
        );
        for ty in ["REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"] {
            // A span of that id is open, but a span is not a message.
            assert_eq!(
                rejects_last(&[
                    started("r1"),
                    reasoning("REASONING_START", "r", None),
                    reasoning(ty, "r", None)
                ]),
                format!(
                    "Cannot send '{ty}' event: No active reasoning message found with ID 'r'. Start a reasoning message with 'REASONING_MESSAGE_START' first."
                )
            );
        }
        // The canonical shape: a span and the message inside it share an id.
        accepts(&[
            started("r1"),
            reasoning("REASONING_START", "r", Some("A")),
            reasoning("REASONING_MESSAGE_START", "r", None),
            reasoning("REASONING_MESSAGE_CONTENT", "r", Some("A")),
            reasoning("REASONING_MESSAGE_END", "r", None),
            reasoning("REASONING_END", "r", Some("A")),
            finished("r1"),
        ]);
        // Each terminal closes only its own entity.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_START", "r", None),
                reasoning("REASONING_MESSAGE_START", "r", None),
                reasoning("REASONING_END", "r", None),
                finished("r1")
            ]),
            "Cannot send 'RUN_FINISHED' while reasoning messages are still active: r"
        );
    }

    #[test]
    fn a_reasoning_span_and_its_message_share_one_owner() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_START", "r", Some("A")),
                reasoning("REASONING_MESSAGE_START", "r", Some("B"))
            ]),
            mismatch(
                "REASONING_MESSAGE_START",
                "B",
                "reasoning message",
                "r",
                "A"
            )
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_MESSAGE_START", "r", None),
                reasoning("REASONING_MESSAGE_CONTENT", "r", Some("A"))
            ]),
            mismatch(
                "REASONING_MESSAGE_CONTENT",
                "A",
                "reasoning message",
                "r",
                PARENT
            )
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_MESSAGE_START", "r", Some("A")),
                reasoning("REASONING_MESSAGE_END", "r", Some("B"))
            ]),
            mismatch("REASONING_MESSAGE_END", "B", "reasoning message", "r", "A")
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_START", "r", Some("A")),
                reasoning("REASONING_END", "r", Some(""))
            ]),
            mismatch("REASONING_END", "", "reasoning message", "r", "A")
        );
        // The owner outlives the close: a reopen by someone else is a contradiction.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_START", "r", Some("A")),
                reasoning("REASONING_END", "r", None),
                reasoning("REASONING_START", "r", Some("B"))
            ]),
            mismatch("REASONING_START", "B", "reasoning message", "r", "A")
        );
    }

    // ---- subagents ----

    #[test]
    fn subagent_lifecycle() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                subagent_started("s1", None),
                subagent_started("s1", None)
            ]),
            "Cannot send 'SUBAGENT_STARTED': subagent 's1' is already active. Finish it with 'SUBAGENT_FINISHED' first."
        );
        for terminal in [subagent_finished("s1"), subagent_error("s1")] {
            assert_eq!(
                rejects_last(&[
                    started("r1"),
                    subagent_started("s1", None),
                    terminal,
                    subagent_started("s1", None)
                ]),
                "Cannot send 'SUBAGENT_STARTED': subagent 's1' has already finished in this run. Subagent IDs are per-invocation and cannot be reused."
            );
        }
        assert_eq!(
            rejects_last(&[started("r1"), subagent_started("s2", Some("s1"))]),
            "Cannot send 'SUBAGENT_STARTED': parentSubagentRunId 's1' has not been started in this run."
        );
        assert_eq!(
            rejects_last(&[started("r1"), subagent_finished("s1")]),
            "Cannot send 'SUBAGENT_FINISHED': no active subagent found with ID 's1'. A 'SUBAGENT_STARTED' event must be sent first."
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                subagent_started("s1", None),
                subagent_finished("s1"),
                subagent_error("s1")
            ]),
            "Cannot send 'SUBAGENT_ERROR': no active subagent found with ID 's1'. A 'SUBAGENT_STARTED' event must be sent first."
        );
        // A parent that already finished still counts as started in this run.
        accepts(&[
            started("r1"),
            subagent_started("s1", None),
            subagent_started("s2", Some("s1")),
            subagent_finished("s1"),
            subagent_started("s3", Some("s1")),
            subagent_error("s2"),
            subagent_finished("s3"),
            finished("r1"),
        ]);
    }

    #[test]
    fn attribution_does_not_need_subagent_lifecycle_events() {
        accepts(&[
            started("r1"),
            text_start("m1", Some("never-started")),
            text_content("m1", Some("never-started")),
            text_end("m1", None),
            step(true, "plan", Some("never-started")),
            step(false, "plan", Some("never-started")),
            subagent_started("s1", None),
            subagent_finished("s1"),
            // Tagging with a closed subagent is not a contradiction either.
            text_start("m2", Some("s1")),
            text_end("m2", Some("s1")),
            finished("r1"),
        ]);
    }

    // ---- attribution of continuations ----

    #[test]
    fn text_continuations_agree_with_the_opener() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", None),
                text_content("m1", Some("A"))
            ]),
            mismatch("TEXT_MESSAGE_CONTENT", "A", "message", "m1", PARENT)
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                text_end("m1", Some("B"))
            ]),
            mismatch("TEXT_MESSAGE_END", "B", "message", "m1", "A")
        );
        // The empty string is a subagent id, not the parent.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("")),
                text_content("m1", None),
                text_content("m1", Some("A"))
            ]),
            mismatch("TEXT_MESSAGE_CONTENT", "A", "message", "m1", "")
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", None),
                text_content("m1", Some(""))
            ]),
            mismatch("TEXT_MESSAGE_CONTENT", "", "message", "m1", PARENT)
        );
    }

    #[test]
    fn the_first_writer_owns_an_id_for_the_whole_run() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                text_end("m1", None),
                text_start("m1", Some("B"))
            ]),
            mismatch("TEXT_MESSAGE_START", "B", "message", "m1", "A")
        );
        // An untagged reopen agrees with anyone and does not hand the id to the parent.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                text_end("m1", None),
                text_start("m1", None),
                text_content("m1", Some("A")),
                text_content("m1", Some("B"))
            ]),
            mismatch("TEXT_MESSAGE_CONTENT", "B", "message", "m1", "A")
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                tool_start("t1", None, Some("A")),
                tool_end("t1", None),
                tool_start("t1", None, Some("B"))
            ]),
            mismatch("TOOL_CALL_START", "B", "tool call", "t1", "A")
        );
    }

    #[test]
    fn tool_call_continuations_agree_with_the_opener() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                tool_start("t1", None, Some("A")),
                tool_args("t1", Some("B"))
            ]),
            mismatch("TOOL_CALL_ARGS", "B", "tool call", "t1", "A")
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                tool_start("t1", None, None),
                tool_end("t1", Some("A"))
            ]),
            mismatch("TOOL_CALL_END", "A", "tool call", "t1", PARENT)
        );
    }

    #[test]
    fn a_tool_call_belongs_to_its_parent_message() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                tool_start("t1", Some("m1"), Some("B"))
            ]),
            "Cannot send 'TOOL_CALL_START': subagentRunId 'B' does not match its parent message 'm1' owner 'A'. A tool call belongs to the message that carries it."
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", None),
                text_end("m1", None),
                tool_start("t1", Some("m1"), Some("A"))
            ]),
            "Cannot send 'TOOL_CALL_START': subagentRunId 'A' does not match its parent message 'm1' owner '(the parent agent)'. A tool call belongs to the message that carries it."
        );
        // Untagged, it inherits the parent message's owner.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                tool_start("t1", Some("m1"), None),
                tool_args("t1", Some("A")),
                tool_args("t1", Some("B"))
            ]),
            mismatch("TOOL_CALL_ARGS", "B", "tool call", "t1", "A")
        );
        // A parent nothing knows of constrains nothing.
        accepts(&[
            started("r1"),
            tool_start("t1", Some("unknown"), Some("A")),
            tool_end("t1", Some("A")),
            finished("r1"),
        ]);
    }

    #[test]
    fn an_untagged_reopen_cannot_move_a_tool_call_to_another_owners_message() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                text_start("m2", Some("B")),
                tool_start("t1", Some("m1"), None),
                tool_end("t1", None),
                tool_start("t1", Some("m2"), None)
            ]),
            "Cannot send 'TOOL_CALL_START': tool call 't1' is owned by 'A' but its parent message 'm2' is owned by 'B'. A tool call belongs to the message that carries it."
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m2", Some("B")),
                tool_start("t1", None, None),
                tool_end("t1", None),
                tool_start("t1", Some("m2"), None)
            ]),
            "Cannot send 'TOOL_CALL_START': tool call 't1' is owned by '(the parent agent)' but its parent message 'm2' is owned by 'B'. A tool call belongs to the message that carries it."
        );
        // A tagged reopen is judged by its tag: against the parent first, then the call.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                text_start("m2", Some("B")),
                tool_start("t1", Some("m1"), None),
                tool_end("t1", None),
                tool_start("t1", Some("m2"), Some("B"))
            ]),
            mismatch("TOOL_CALL_START", "B", "tool call", "t1", "A")
        );
    }

    #[test]
    fn encrypted_values_agree_with_the_entity_their_subtype_names() {
        // The owner of a closed tool call is still on record.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                tool_start("t1", None, Some("A")),
                tool_end("t1", None),
                encrypted("tool-call", "t1", Some("B"))
            ]),
            mismatch("REASONING_ENCRYPTED_VALUE", "B", "tool call", "t1", "A")
        );
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", None),
                encrypted("message", "m1", Some("B"))
            ]),
            mismatch("REASONING_ENCRYPTED_VALUE", "B", "message", "m1", PARENT)
        );
        // A "message" may be a reasoning message.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_MESSAGE_START", "r", Some("A")),
                encrypted("message", "r", Some("B"))
            ]),
            mismatch("REASONING_ENCRYPTED_VALUE", "B", "message", "r", "A")
        );
        accepts(&[
            started("r1"),
            // Kinds are separate namespaces: the message subtype ignores tool calls...
            tool_start("x", None, Some("A")),
            encrypted("message", "x", Some("B")),
            // ...the tool-call subtype ignores messages...
            text_start("y", Some("A")),
            encrypted("tool-call", "y", Some("B")),
            // ...an unknown entity has no opener to disagree with...
            encrypted("message", "nobody", Some("B")),
            // ...and an untagged value never disagrees.
            encrypted("tool-call", "x", None),
            tool_end("x", None),
            text_end("y", None),
            finished("r1"),
        ]);
    }

    #[test]
    fn activity_deltas_agree_with_the_snapshot_that_owns_the_activity() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                activity_snapshot("a1", None, Some("A")),
                activity_delta("a1", Some("B"))
            ]),
            mismatch("ACTIVITY_DELTA", "B", "activity", "a1", "A")
        );
        // replace:false leaves an existing activity, and its owner, alone.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                activity_snapshot("a1", None, Some("A")),
                activity_snapshot("a1", Some(false), Some("B")),
                activity_delta("a1", Some("B"))
            ]),
            mismatch("ACTIVITY_DELTA", "B", "activity", "a1", "A")
        );
        // A replacing snapshot re-owns it.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                activity_snapshot("a1", None, Some("A")),
                activity_snapshot("a1", Some(true), None),
                activity_delta("a1", Some("A"))
            ]),
            mismatch("ACTIVITY_DELTA", "A", "activity", "a1", PARENT)
        );
        accepts(&[
            started("r1"),
            activity_snapshot("a1", Some(false), Some("B")),
            activity_delta("a1", Some("B")),
            activity_snapshot("a1", None, Some("A")),
            activity_delta("a1", Some("A")),
            activity_delta("unknown", Some("A")),
            finished("r1"),
        ]);
    }

    #[test]
    fn a_tool_call_result_owns_the_message_it_mints() {
        let result = |tag: Option<&str>| {
            tagged(
                json!({"type": "TOOL_CALL_RESULT", "messageId": "tm", "toolCallId": "t1", "content": "42"}),
                tag,
            )
        };
        assert_eq!(
            rejects_last(&[
                started("r1"),
                result(Some("A")),
                text_start("tm", Some("B"))
            ]),
            mismatch("TEXT_MESSAGE_START", "B", "message", "tm", "A")
        );
        // The newest mint wins, untagged included.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                result(Some("A")),
                result(None),
                text_start("tm", Some("A"))
            ]),
            mismatch("TEXT_MESSAGE_START", "A", "message", "tm", PARENT)
        );
    }

    #[test]
    fn a_messages_snapshot_replaces_recorded_owners() {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                text_end("m1", None),
                snapshot(&json!([user("m1", Some("B"))])),
                text_start("m1", Some("A"))
            ]),
            mismatch("TEXT_MESSAGE_START", "A", "message", "m1", "B")
        );
        // Even the owner of an open message; and within a snapshot the last copy wins.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                snapshot(&json!([user("m1", Some("C")), user("m1", None)])),
                text_content("m1", Some("A"))
            ]),
            mismatch("TEXT_MESSAGE_CONTENT", "A", "message", "m1", PARENT)
        );
        // Each role seeds the kind it streams as; tool calls take their message's owner.
        let messages = json!([
            {"id": "r", "role": "reasoning", "content": "hmm", "subagentRunId": "A"},
            {"id": "a", "role": "activity", "activityType": "PLAN", "content": {}, "subagentRunId": "A"},
            {"id": "m", "role": "assistant", "subagentRunId": "A", "toolCalls": [
                {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]},
        ]);
        for (next, message) in [
            (
                reasoning("REASONING_START", "r", Some("B")),
                mismatch("REASONING_START", "B", "reasoning message", "r", "A"),
            ),
            (
                activity_delta("a", Some("B")),
                mismatch("ACTIVITY_DELTA", "B", "activity", "a", "A"),
            ),
            (
                tool_start("t", None, Some("B")),
                mismatch("TOOL_CALL_START", "B", "tool call", "t", "A"),
            ),
            (
                text_start("m", Some("B")),
                mismatch("TEXT_MESSAGE_START", "B", "message", "m", "A"),
            ),
        ] {
            assert_eq!(
                rejects_last(&[started("r1"), snapshot(&messages), next]),
                message
            );
        }
        // A reasoning message is not a text message.
        accepts(&[
            started("r1"),
            snapshot(&messages),
            text_start("r", Some("B")),
            text_end("r", None),
            finished("r1"),
        ]);
    }

    #[test]
    fn the_run_started_input_seeds_only_unclaimed_owners() {
        let with_input = |run: &str, messages: Value| {
            let mut event = started(run);
            event["input"] = json!({"threadId": "th", "runId": run, "messages": messages});
            event
        };
        assert_eq!(
            rejects_last(&[
                with_input("r1", json!([user("m1", Some("A")), user("m1", Some("B"))])),
                text_start("m1", Some("B"))
            ]),
            mismatch("TEXT_MESSAGE_START", "B", "message", "m1", "A")
        );
        // Seeded after the previous run was forgotten.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                text_start("m1", Some("A")),
                text_end("m1", None),
                finished("r1"),
                with_input("r2", json!([user("m1", None)])),
                text_start("m1", Some("A"))
            ]),
            mismatch("TEXT_MESSAGE_START", "A", "message", "m1", PARENT)
        );
    }

    // ---- identity (seeded verifier) ----

    #[test]
    fn a_seeded_verifier_holds_every_run_to_the_input_thread() {
        assert_eq!(
            rejects_last_with(
                Verifier::for_thread("th"),
                &[json!({"type": "RUN_STARTED", "threadId": "other", "runId": "r1"})]
            ),
            "Cannot send 'RUN_STARTED' with threadId 'other': this stream belongs to thread 'th'. Every run on a stream carries the input's threadId."
        );
        assert_eq!(
            rejects_last_with(
                Verifier::for_thread("th"),
                &[
                    started("r1"),
                    finished("r1"),
                    json!({"type": "RUN_STARTED", "threadId": "other", "runId": "r2"})
                ]
            ),
            "Cannot send 'RUN_STARTED' with threadId 'other': this stream belongs to thread 'th'. Every run on a stream carries the input's threadId."
        );
        assert_eq!(
            rejects_last_with(
                Verifier::for_thread("th"),
                &[
                    started("r1"),
                    step(true, "open", None),
                    json!({"type": "RUN_FINISHED", "threadId": "other", "runId": "r1"})
                ]
            ),
            "Cannot send 'RUN_FINISHED' with threadId 'other': run 'r1' was opened on thread 'th'. A run's boundary events carry the input's threadId."
        );
        assert_eq!(
            run_with(
                Verifier::for_thread("th"),
                &[
                    started("r1"),
                    finished("r1"),
                    run_error(),
                    started("r2"),
                    finished("r2"),
                ]
            ),
            Ok(())
        );
    }

    #[test]
    fn identity_beyond_the_thread_is_left_to_the_judge() {
        // @ag-ui/client 1.0.0 accepts all of these, seeded or not.
        let interrupt = |id: &str| json!({"id": id, "reason": "input_required"});
        let streams = [
            vec![
                json!({"type": "RUN_STARTED", "threadId": "th", "runId": "r1"}),
                json!({"type": "RUN_FINISHED", "threadId": "th", "runId": "r2"}),
            ],
            vec![
                started("r1"),
                json!({"type": "RUN_FINISHED", "threadId": "th", "runId": "r1", "outcome": {
                    "type": "interrupt", "interrupts": [interrupt("i1"), interrupt("i1")]
                }}),
            ],
        ];
        for stream in streams {
            assert_eq!(run_with(Verifier::for_thread("th"), &stream), Ok(()));
            assert_eq!(run_with(Verifier::new(), &stream), Ok(()));
        }
        // An unseeded verifier checks no thread at all.
        accepts(&[
            json!({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}),
            json!({"type": "RUN_FINISHED", "threadId": "t2", "runId": "r1"}),
            json!({"type": "RUN_STARTED", "threadId": "t3", "runId": "r2"}),
        ]);
    }
}
