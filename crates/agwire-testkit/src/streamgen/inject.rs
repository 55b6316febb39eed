//! The faulty event of a broken stream, chosen by its fault; here too the
//! faults of the run's own lifecycle.

use super::faults::Fault;
use super::generator::Gen;
use super::schema::Kind;
use super::wire::ty;

impl Gen {
    /// Reaches the state `f` needs with valid events, then commits its faulty
    /// event; each family of faults has a helper of its own.
    pub(super) fn inject(&mut self, f: Fault) {
        let tpl = f.template();
        match f {
            Fault::FirstNotRunStarted => unreachable!("handled by broken_stream"),
            Fault::NestedRunStarted | Fault::AfterRunFinished | Fault::AfterRunError => {
                self.run_fault(f, tpl);
            }
            Fault::FinishOpenSteps
            | Fault::FinishOpenText
            | Fault::FinishOpenReasoningMessage
            | Fault::FinishOpenReasoningSpan
            | Fault::FinishOpenTool
            | Fault::FinishOpenSubagent => self.finish_open_fault(f),
            Fault::DupTextStart
            | Fault::DupToolStart
            | Fault::DupReasoningSpan
            | Fault::DupReasoningMessage => self.duplicate_fault(f, tpl),
            Fault::TextContentNoStart
            | Fault::TextEndNoStart
            | Fault::ToolArgsNoStart
            | Fault::ToolEndNoStart
            | Fault::ReasoningContentNoStart
            | Fault::ReasoningMessageEndNoStart
            | Fault::ReasoningEndNoSpan => self.unstarted_fault(f, tpl),
            Fault::StepNotStarted | Fault::StepOtherOwner | Fault::StepDuplicate => {
                self.step_fault(f, tpl);
            }
            Fault::SubagentTerminalUnknown
            | Fault::SubagentDuplicate
            | Fault::SubagentReused
            | Fault::SubagentParentUnknown => self.subagent_fault(f, tpl),
            Fault::TagMismatchMessage => self.tag_mismatch_message(tpl),
            Fault::TagMismatchToolCall => self.tag_mismatch_tool(tpl),
            Fault::TagMismatchReasoning => self.tag_mismatch_reasoning(tpl),
            Fault::TagMismatchActivity => self.tag_mismatch_activity(tpl),
            Fault::ToolParentOwnerMismatch | Fault::ToolReopenParentOwner => {
                self.tool_parent_fault(f, tpl);
            }
            Fault::ChunkTextNoId
            | Fault::ChunkToolNoId
            | Fault::ChunkToolNoName
            | Fault::ChunkReasoningNoId
            | Fault::ChunkConflictRole
            | Fault::ChunkConflictName
            | Fault::ChunkConflictToolName
            | Fault::ChunkConflictParent
            | Fault::ChunkLaneOwner
            | Fault::ChunkAmbiguous => self.chunk_fault(f, tpl),
        }
    }

    fn run_fault(&mut self, f: Fault, tpl: &'static str) {
        match f {
            Fault::NestedRunStarted => {
                let run_id = if self.p(0.3) {
                    self.run_id.clone()
                } else {
                    self.fresh("run")
                };
                let ev = self.run_started_event(&run_id);
                self.commit(vec![ev], "nested_run_started", tpl);
            }
            Fault::AfterRunFinished => {
                self.close_all();
                self.run_finish();
                let mut evs = Vec::new();
                if self.p(0.2) {
                    evs.push(self.unknown_event());
                }
                evs.push(self.some_event());
                if ty(evs.last().expect("event")) == "RUN_FINISHED" {
                    self.commit(evs, "after_finished/run_finished", tpl);
                } else {
                    self.commit(evs, "after_finished/event", tpl);
                }
            }
            Fault::AfterRunError => {
                let label = if self.p(0.3) {
                    self.close_all();
                    self.run_finish();
                    "after_error/late_error"
                } else {
                    "after_error/mid_run"
                };
                let ev = self.run_error_event();
                self.emit(ev);
                let ev = if self.p(0.25) {
                    self.run_error_event()
                } else {
                    self.some_event()
                };
                self.commit(vec![ev], label, tpl);
            }
            _ => unreachable!("{f:?} is not a run fault"),
        }
    }

    fn finish_open_fault(&mut self, f: Fault) {
        match f {
            Fault::FinishOpenSteps => {
                self.ensure_step();
                self.run_finished_fault("finish_open/steps", f);
            }
            Fault::FinishOpenText => {
                self.close_steps();
                self.ensure_explicit(Kind::Text);
                self.run_finished_fault("finish_open/text", f);
            }
            Fault::FinishOpenReasoningMessage => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                self.ensure_explicit(Kind::Reasoning);
                self.run_finished_fault("finish_open/reasoning_message", f);
            }
            Fault::FinishOpenReasoningSpan => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                for id in self.explicit(Kind::Reasoning) {
                    self.close_reasoning(&id);
                }
                self.ensure_span();
                self.run_finished_fault("finish_open/reasoning_span", f);
            }
            Fault::FinishOpenTool => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                for id in self.explicit(Kind::Reasoning) {
                    self.close_reasoning(&id);
                }
                for id in self.m.spans.0.clone() {
                    self.close_span(&id);
                }
                self.ensure_explicit(Kind::Tool);
                self.run_finished_fault("finish_open/tool", f);
            }
            Fault::FinishOpenSubagent => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                for id in self.explicit(Kind::Reasoning) {
                    self.close_reasoning(&id);
                }
                for id in self.m.spans.0.clone() {
                    self.close_span(&id);
                }
                for id in self.explicit(Kind::Tool) {
                    self.close_tool(&id);
                }
                self.ensure_subagent();
                self.run_finished_fault("finish_open/subagent", f);
            }
            _ => unreachable!("{f:?} is not a finish-open fault"),
        }
    }
}
