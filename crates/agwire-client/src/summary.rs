//! [`RunSummary`]: what a finished run folded into.

use agwire_core::apply::{RunEnd, Session};
use agwire_core::{Interrupt, Message, RunFinishedOutcome, TokenUsage};
use serde_json::Value;

/// A run read to its end and folded (`#[non_exhaustive]`: read it; the
/// client builds it).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunSummary {
    /// Messages, state, pending interrupts and tool calls, and how the run
    /// ended, exactly as the official client would hold them.
    pub session: Session,
    /// Messages this run added (ids absent from the messages it started
    /// from), as the official client's `runAgent()` returns them.
    pub new_messages: Vec<Message>,
}

impl RunSummary {
    /// The summary of `session`, folded from `before`.
    pub(crate) fn new(before: &[Message], session: Session) -> Self {
        let before: std::collections::HashSet<&str> = before.iter().map(Message::id).collect();
        let new_messages = session
            .messages
            .iter()
            .filter(|m| !before.contains(m.id()))
            .cloned()
            .collect();
        Self {
            session,
            new_messages,
        }
    }

    /// The conversation after the run.
    pub fn messages(&self) -> &[Message] {
        &self.session.messages
    }

    /// The state after the run.
    pub fn state(&self) -> &Value {
        &self.session.state
    }

    /// `RUN_FINISHED.result` of a successful run.
    pub fn result(&self) -> Option<&Value> {
        self.session.result.as_ref()
    }

    /// The outcome of a finished run (`None` if it ended in `RUN_ERROR`).
    pub fn outcome(&self) -> Option<&RunFinishedOutcome> {
        match &self.session.last_run {
            Some(RunEnd::Finished { outcome, .. }) => Some(outcome),
            _ => None,
        }
    }

    /// The agent's `RUN_ERROR` message and code, if the run failed.
    pub fn error(&self) -> Option<(&str, Option<&str>)> {
        match &self.session.last_run {
            Some(RunEnd::Errored { message, code, .. }) => Some((message, code.as_deref())),
            _ => None,
        }
    }

    /// Interrupts the next run's `resume` must answer.
    pub fn pending_interrupts(&self) -> &[Interrupt] {
        &self.session.pending_interrupts
    }

    /// Frontend tool calls the next run's tool messages must answer.
    pub fn pending_tool_call_ids(&self) -> &[String] {
        &self.session.pending_tool_call_ids
    }

    /// Token usage the agent reported with its terminal event.
    pub fn usage(&self) -> &[TokenUsage] {
        match &self.session.last_run {
            Some(RunEnd::Finished { usage, .. } | RunEnd::Errored { usage, .. }) => {
                usage.as_deref().unwrap_or(&[])
            }
            None => &[],
        }
    }
}
