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
mod tests;
