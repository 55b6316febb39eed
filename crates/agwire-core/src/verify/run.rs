//! Runs: where the stream is between them, and what a run must have closed to finish.

use std::fmt::Write as _;

use super::registry::{MESSAGE, ONLY, SPAN};
use super::{Subagent, Verifier, VerifyError, fail};
use crate::event::{EventType, RunFinishedEvent, RunStartedEvent};

impl Verifier {
    /// The rules that depend only on where the stream is between runs; they fire before
    /// anything specific to the event.
    pub(super) fn check_run_boundary(&mut self, ty: EventType) -> Result<(), VerifyError> {
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

    pub(super) fn start_run(&mut self, e: &RunStartedEvent) -> Result<(), VerifyError> {
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

    pub(super) fn finish_run(&mut self, e: &RunFinishedEvent) -> Result<(), VerifyError> {
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
}
