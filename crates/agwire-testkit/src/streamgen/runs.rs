//! Whole streams and their runs: starting, finishing and failing a run, and
//! placing the 1.1 rules only later clients check.

use rand::seq::IndexedRandom;
use serde_json::{Value, json};

use super::faults::SpecFault;
use super::generator::Gen;
use super::message::Msg;
use super::wire::E;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunEnd {
    Finished,
    FinishedThenError,
    Error,
    Truncated,
}

impl Gen {
    pub(super) fn valid_stream(&mut self) {
        self.initial_context();
        if self.p(0.01) {
            // Nothing the client knows: no run at all.
            if self.p(0.5) {
                let ev = self.unknown_event();
                self.push(ev);
            }
            self.feature("stream_without_run");
            return;
        }
        if self.p(0.01) {
            // A stream may open with a failed run.
            self.emit(E::new("RUN_ERROR").s("message", "boot failure").done());
            self.feature("run_error_first");
        }
        if self.p(0.03) {
            let ev = self.unknown_event();
            self.push(ev);
            self.feature("unknown_event_before_run");
        }
        let runs = *[1usize, 1, 1, 1, 2, 2, 3]
            .choose(&mut self.rng)
            .unwrap_or(&1);
        for r in 0..runs {
            let last = r + 1 == runs;
            self.one_run(last);
        }
        if runs > 1 {
            self.feature("several_runs");
        }
    }

    pub(super) fn one_run(&mut self, last: bool) {
        self.one_run_with(last, None);
    }

    fn one_run_with(&mut self, last: bool, forced: Option<RunEnd>) {
        let end = match self.range(0, 100) {
            0..80 => RunEnd::Finished,
            80..85 => RunEnd::FinishedThenError,
            85..97 => RunEnd::Error,
            _ if last => RunEnd::Truncated,
            _ => RunEnd::Finished,
        };
        let end = forced.unwrap_or(end);
        self.run_start(last);
        let n = self.range(2, 28);
        self.body(n);
        match end {
            RunEnd::Finished | RunEnd::FinishedThenError => {
                self.close_all();
                self.run_finish();
                if end == RunEnd::FinishedThenError {
                    if self.p(0.5) {
                        let ev = self.unknown_event();
                        self.push(ev);
                    }
                    let ev = self.run_error_event();
                    self.emit(ev);
                    self.feature("late_run_error");
                }
            }
            RunEnd::Error => {
                if self.p(0.5) {
                    self.close_all();
                }
                let ev = self.run_error_event();
                self.emit(ev);
                self.feature("run_error");
            }
            RunEnd::Truncated => self.feature("truncated_stream"),
        }
    }

    pub(super) fn run_started_event(&mut self, run_id: &str) -> Value {
        let mut e = E::new("RUN_STARTED")
            .s("threadId", self.thread_id.clone())
            .s("runId", run_id);
        if let Some(prev) = self.prev_run_id.clone()
            && self.p(0.15)
        {
            e = e.s("parentRunId", prev);
        }
        let version = match self.range(0, 20) {
            0..12 => Some("1.0"),
            12..15 => None,
            15..18 => Some("1.1"),
            18 => Some("2.0"),
            _ => Some("1"),
        };
        e = e.os("protocolVersion", version);
        if self.p(0.25) {
            e = e.v("input", self.input_echo(run_id));
            self.feature("run_started_input_echo");
        }
        e.done()
    }

    fn input_echo(&mut self, run_id: &str) -> Value {
        let mut messages = Vec::new();
        if self.p(0.6) {
            for m in self.msgs.clone() {
                if m.role == "activity" || self.p(0.2) {
                    continue;
                }
                let owner = self.owner_in_bucket(&m).unwrap_or_else(|| m.owner.clone());
                messages.push(m.to_json(&owner));
            }
        }
        let uid = self.fresh("user");
        let mut user = Msg::new(&uid, "user", None);
        user.content = if self.p(0.2) {
            self.parts()
        } else {
            Value::String(self.text())
        };
        messages.push(user.to_json(&None));
        if self.p(0.1) {
            // Echoed history attributed to a subagent seeds that owner.
            let id = self.fresh("echo");
            let owner = Some(self.attr_tag());
            let mut m = Msg::new(&id, "assistant", owner.clone());
            m.content = Value::String(self.text());
            messages.push(m.to_json(&owner));
            self.feature("input_echo_attributed");
        }
        let mut input = json!({"threadId": self.thread_id, "runId": run_id, "messages": messages});
        if self.p(0.5) {
            input["tools"] = json!([{"name": "search", "description": "Search the web", "parameters": {"type": "object"}}]);
            input["context"] = json!([{"description": "locale", "value": "de-AT"}]);
        }
        if self.p(0.3) {
            input["state"] = self.state.clone();
            if input["state"].is_null() {
                input["state"] = json!({});
            }
        }
        if self.p(0.2) {
            input["forwardedProps"] = json!({"mode": "chat"});
        }
        if !self.last_interrupts.is_empty() {
            let resume: Vec<Value> = self
                .last_interrupts
                .clone()
                .into_iter()
                .map(|id| json!({"interruptId": id, "status": if self.p(0.7) {"resolved"} else {"cancelled"}, "payload": {"ok": true}}))
                .collect();
            input["resume"] = Value::Array(resume);
            self.feature("resume_echo");
        }
        input
    }

    pub(super) fn run_start(&mut self, last: bool) {
        self.run_no += 1;
        if self.m.run_error {
            self.feature("run_after_run_error");
        }
        let run_id = if last {
            self.final_run_id.clone()
        } else {
            self.fresh("run")
        };
        let mut ev = self.run_started_event(&run_id);
        if let Some((SpecFault::RunStartedThread, n)) = self.spec
            && n == self.run_no
        {
            ev["threadId"] = json!(format!("{}-other", self.thread_id));
            self.spec = None;
        }
        self.emit(ev);
        self.run_id = run_id;
        self.run_tool_ids.clear();
        self.last_interrupts.clear();
    }

    pub(super) fn run_finished_base(&mut self) -> E {
        E::new("RUN_FINISHED")
            .s("threadId", self.thread_id.clone())
            .s("runId", self.run_id.clone())
    }

    pub(super) fn run_finish(&mut self) {
        let mut e = self.run_finished_base();
        let mut interrupts = Vec::new();
        let mut outcome = match self.range(0, 100) {
            0..40 => None,
            40..55 => Some(json!({"type": "success"})),
            55..65 => {
                let pending: Vec<String> = self
                    .run_tool_ids
                    .iter()
                    .filter(|t| !self.answered.contains(*t))
                    .cloned()
                    .collect();
                self.feature("pending_tool_call_ids");
                Some(json!({"type": "success", "pendingToolCallIds": pending}))
            }
            65..82 => {
                let n = self.range(1, 4);
                let mut list = Vec::new();
                for _ in 0..n {
                    let id = self.fresh("int");
                    let mut i = json!({"id": id, "reason": self.pick_str(&["tool_call", "input_required", "confirmation", "acme:review"])});
                    if self.p(0.5) {
                        i["message"] = json!(self.text());
                    }
                    if self.p(0.3) {
                        let tools = self.run_tool_ids.clone();
                        if let Some(t) = self.pick(&tools) {
                            i["toolCallId"] = json!(t);
                        }
                    }
                    if self.p(0.3) {
                        i["responseSchema"] = json!({"type": "object", "properties": {"approved": {"type": "boolean"}}});
                    }
                    if self.p(0.2) {
                        i["expiresAt"] = json!("2099-01-01T00:00:00Z");
                    }
                    if self.p(0.2) {
                        i["metadata"] = self.metadata();
                    }
                    if self.p(0.2) {
                        i["subagentRunId"] = json!(self.attr_tag());
                    }
                    interrupts.push(id);
                    list.push(i);
                }
                self.feature("interrupt_outcome");
                Some(json!({"type": "interrupt", "interrupts": list}))
            }
            82..90 => {
                self.feature("cancelled_outcome");
                Some(json!({"type": "cancelled"}))
            }
            90..95 => {
                self.feature("legacy_null_outcome");
                Some(Value::Null)
            }
            _ => {
                self.feature("unknown_outcome_stripped");
                Some(json!({"type": "paused_v2", "until": "later"}))
            }
        };
        if let Some((SpecFault::DuplicateInterruptIds, _)) = self.spec {
            let id = self.fresh("int");
            outcome = Some(json!({"type": "interrupt", "interrupts": [
                {"id": id, "reason": "confirmation"}, {"id": id, "reason": "input_required"}]}));
            self.spec = None;
            interrupts = vec![id];
        }
        e = e.ov("outcome", outcome);
        if self.p(0.3) {
            e = e.v("result", self.json_value(2));
            self.feature("run_result");
        } else if self.p(0.03) {
            e = e.v("result", Value::Null);
            self.feature("legacy_null_result");
        }
        if self.p(0.3) {
            e = e.v("usage", self.usage());
        }
        let mut ev = e.done();
        match self.spec {
            Some((SpecFault::RunFinishedRunId, n)) if n == self.run_no => {
                ev["runId"] = json!(format!("{}-other", self.run_id));
                self.spec = None;
            }
            Some((SpecFault::RunFinishedThread, n)) if n == self.run_no => {
                ev["threadId"] = json!(format!("{}-other", self.thread_id));
                self.spec = None;
            }
            _ => {}
        }
        self.emit(ev);
        self.last_interrupts = interrupts;
        self.prev_run_id = Some(self.run_id.clone());
    }

    pub(super) fn run_error_event(&mut self) -> Value {
        let mut e = E::new("RUN_ERROR").s("message", format!("failed: {}", self.text()));
        if self.p(0.5) {
            e = e.s(
                "code",
                self.pick_str(&["rate_limited", "abort", "internal", "UPSTREAM_5XX"]),
            );
        }
        if self.p(0.2) {
            e = e.v("usage", self.usage());
        }
        self.prev_run_id = Some(self.run_id.clone());
        e.done()
    }

    pub(super) fn unknown_event(&mut self) -> Value {
        self.feature("unknown_event");
        let t = self.pick_str(&["THINKING_STEP_V2", "META", "FUTURE_EVENT", "x-vendor-event"]);
        json!({"type": t, "payload": self.json_value(1)})
    }

    // ----- rules only later clients check -----

    pub(super) fn spec_stream(&mut self, fault: SpecFault) {
        self.initial_context();
        let runs = self.range(1, 4);
        let target = self.range(1, runs + 1);
        self.spec = Some((fault, target));
        for r in 1..=runs {
            let forced = (r == target).then_some(RunEnd::Finished);
            self.one_run_with(r == runs, forced);
        }
        assert!(
            self.spec.is_none(),
            "spec fault {fault:?} was not placed (seed {:#x}, index {})",
            self.seed,
            self.index
        );
        self.intended = Some(fault.fragment());
        self.fault_key = Some(fault.key());
    }
}
