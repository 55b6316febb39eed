//! Subagent invocations: one start and one terminal per id in a run.

use super::{Subagent, Verifier, VerifyError, fail};
use crate::event::{EventType, SubagentStartedEvent};

impl Verifier {
    pub(super) fn start_subagent(&mut self, e: &SubagentStartedEvent) -> Result<(), VerifyError> {
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

    pub(super) fn close_subagent(&mut self, ty: EventType, id: &str) -> Result<(), VerifyError> {
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
}
