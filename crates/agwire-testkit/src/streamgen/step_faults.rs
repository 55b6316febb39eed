//! Faults of steps and subagents.

use std::collections::BTreeSet;

use super::faults::Fault;
use super::generator::Gen;
use super::vocabulary::STEP_NAMES;
use super::wire::{E, Owner};

impl Gen {
    pub(super) fn step_fault(&mut self, f: Fault, tpl: &'static str) {
        match f {
            Fault::StepNotStarted => {
                let free: Vec<&'static str> = STEP_NAMES
                    .iter()
                    .copied()
                    .filter(|n| {
                        !self
                            .m
                            .steps
                            .iter()
                            .any(|(_, names)| names.iter().any(|x| x == n))
                    })
                    .collect();
                let name = match self.pick(&free) {
                    Some(n) if self.p(0.5) => n.to_owned(),
                    _ => self.fresh("never"),
                };
                let tag = self.pick_tag();
                let ev = E::new("STEP_FINISHED").s("stepName", name).tag(&tag).done();
                self.commit(vec![ev], "step/not_started", tpl);
            }
            Fault::StepOtherOwner => {
                let (owner, name) = self.ensure_step();
                let mut other: Owner = match &owner {
                    None => Some(self.other_tag(&None)),
                    Some(_) if self.p(0.5) => None,
                    Some(_) => Some(self.other_tag(&owner)),
                };
                while self.m.step_active(&other, &name) {
                    other = Some(self.fresh("other"));
                }
                let ev = E::new("STEP_FINISHED")
                    .s("stepName", name)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "step/other_owner", tpl);
            }
            Fault::StepDuplicate => {
                let (owner, name) = self.ensure_step();
                let ev = E::new("STEP_STARTED")
                    .s("stepName", name)
                    .tag(&owner)
                    .done();
                self.commit(vec![ev], "step/duplicate", tpl);
            }
            _ => unreachable!("{f:?} is not a step fault"),
        }
    }

    pub(super) fn subagent_fault(&mut self, f: Fault, tpl: &'static str) {
        match f {
            Fault::SubagentTerminalUnknown => {
                let closed: Vec<String> = self
                    .m
                    .subs_closed
                    .iter()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let (label, id) = match self.pick(&closed) {
                    Some(id) if self.p(0.5) => ("subagent/terminal_after_terminal", id),
                    _ => ("subagent/terminal_unknown", self.fresh("nosub")),
                };
                let ev = if self.p(0.5) {
                    E::new("SUBAGENT_FINISHED").s("subagentRunId", id).done()
                } else {
                    E::new("SUBAGENT_ERROR")
                        .s("subagentRunId", id)
                        .s("message", "x")
                        .done()
                };
                self.commit(vec![ev], label, tpl);
            }
            Fault::SubagentDuplicate => {
                let id = self.ensure_subagent();
                let ev = E::new("SUBAGENT_STARTED")
                    .s("subagentRunId", id)
                    .s("name", "again")
                    .done();
                self.commit(vec![ev], "subagent/duplicate", tpl);
            }
            Fault::SubagentReused => {
                let closed: Vec<String> = self
                    .m
                    .subs_closed
                    .iter()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let id = match self.pick(&closed) {
                    Some(id) => id,
                    None => {
                        let id = self.start_subagent();
                        let error = self.p(0.3);
                        self.finish_subagent(&id, error);
                        id
                    }
                };
                let ev = E::new("SUBAGENT_STARTED")
                    .s("subagentRunId", id)
                    .s("name", "again")
                    .done();
                self.commit(vec![ev], "subagent/reused", tpl);
            }
            Fault::SubagentParentUnknown => {
                let ev = E::new("SUBAGENT_STARTED")
                    .s("subagentRunId", self.fresh("sub"))
                    .s("name", "child")
                    .s("parentSubagentRunId", self.fresh("ghost-parent"))
                    .done();
                self.commit(vec![ev], "subagent/parent_unknown", tpl);
            }
            _ => unreachable!("{f:?} is not a subagent fault"),
        }
    }
}
