//! Steps: open per owner, and finished only by whoever started them.

use std::fmt::Write as _;

use super::{StepGroup, Verifier, VerifyError, fail};

impl Verifier {
    pub(super) fn start_step(
        &mut self,
        name: &str,
        owner: Option<&str>,
    ) -> Result<(), VerifyError> {
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

    pub(super) fn finish_step(
        &mut self,
        name: &str,
        owner: Option<&str>,
    ) -> Result<(), VerifyError> {
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
}
