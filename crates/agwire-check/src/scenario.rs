//! The scenarios: what each sends, and how its answers are judged.
//!
//! An arbitrary agent cannot be made to follow a prompt, so a scenario that
//! needs the agent to do something (call a tool, touch the state, interrupt)
//! judges what the agent did and says "not exercised" when it did not.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agwire_codec::negotiate::{PROTO_CONTENT_TYPE, SSE_CONTENT_TYPE};
use agwire_codec::proto::FrameDecoder;
use agwire_codec::sse::SseDecoder;
use agwire_core::apply::RunEnd;
use agwire_core::decode::{DecodeMode, decode};
use agwire_core::{
    AgentCapabilities, Message, PROTOCOL_VERSION, ResumeEntry, ResumeStatus, RunAgentInput,
    RunFinishedOutcome, Tool,
};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::exchange::{self, Ask, Exchange, Judged, Wire};
use crate::family::Family;
use crate::report::{
    ExchangeReport, FamilyReport, Features, Finding, Report, ScenarioReport, Severity, Verdict,
};
use crate::{Check, Error, Progress};

/// One scenario of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Scenario {
    /// One user message; a plain text turn.
    Text,
    /// A conversation of three messages carrying history.
    History,
    /// A frontend tool offered and asked for; a call is answered with a tool
    /// message and the run continued.
    FrontendTools,
    /// A state sent with the input; snapshots and deltas applied and checked.
    State,
    /// A request for approval; an interrupt is resumed (cancelled).
    Interrupt,
    /// The client aborts mid-stream; a new run on the thread must be taken.
    Cancel,
    /// Malformed `RunAgentInput`s must get a 4xx.
    BadInput,
    /// `Accept` variants: SSE unless protobuf is admitted.
    Negotiation,
    /// `Last-Event-ID` on a stream whose frames carry ids: exactly the rest.
    Resume,
    /// The server's `AgentCapabilities` document, when it publishes one.
    Capabilities,
}

impl Scenario {
    /// Every scenario, in the order a check runs them.
    pub const ALL: [Scenario; 10] = [
        Scenario::Text,
        Scenario::History,
        Scenario::FrontendTools,
        Scenario::State,
        Scenario::Interrupt,
        Scenario::Cancel,
        Scenario::BadInput,
        Scenario::Negotiation,
        Scenario::Resume,
        Scenario::Capabilities,
    ];

    /// Its name (`--scenario`).
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Text => "text",
            Scenario::History => "history",
            Scenario::FrontendTools => "frontend-tools",
            Scenario::State => "state",
            Scenario::Interrupt => "interrupt",
            Scenario::Cancel => "cancel",
            Scenario::BadInput => "bad-input",
            Scenario::Negotiation => "negotiation",
            Scenario::Resume => "resume",
            Scenario::Capabilities => "capabilities",
        }
    }

    /// Parses [`Scenario::name`].
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// What it sends, in a sentence.
    pub fn description(self) -> &'static str {
        match self {
            Scenario::Text => "one user message on a new thread",
            Scenario::History => "user, assistant, user: a conversation carrying history",
            Scenario::FrontendTools => {
                "offers the frontend tool confirm_action and asks for it; a call is answered with a tool message in a second run"
            }
            Scenario::State => "sends a state object and asks the agent to change it",
            Scenario::Interrupt => {
                "asks for something that needs approval; an interrupt is resumed as cancelled"
            }
            Scenario::Cancel => {
                "aborts the stream after its first bytes, then starts a new run on the thread"
            }
            Scenario::BadInput => {
                "posts a body that is not JSON, one without threadId/runId, and one with messages of the wrong type"
            }
            Scenario::Negotiation => {
                "asks with Accept: application/json, only protobuf, and only text/event-stream"
            }
            Scenario::Resume => {
                "reconnects with Last-Event-ID at the middle of a finished stream whose frames carry ids"
            }
            Scenario::Capabilities => {
                "reads the AgentCapabilities document given with --capabilities"
            }
        }
    }
}

/// The accept header of the run scenarios.
fn accept_of(wire: Wire) -> &'static str {
    match wire {
        Wire::Sse => SSE_CONTENT_TYPE,
        Wire::Proto => PROTO_CONTENT_TYPE,
    }
}

/// A user message.
fn user(text: &str) -> Message {
    message(json!({"id": new_id("user"), "role": "user", "content": text}))
}

fn message(value: Value) -> Message {
    // The literals here are valid messages; a failure would be a bug caught
    // by every test of a scenario that sends them.
    serde_json::from_value(value).unwrap_or_else(|e| unreachable!("a valid message: {e}"))
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

/// The frontend tool the tools scenario offers.
fn confirm_tool() -> Tool {
    serde_json::from_value(json!({
        "name": "confirm_action",
        "description": "Ask the user to confirm an action before it is done. Call this whenever the user asks you to confirm something.",
        "parameters": {
            "type": "object",
            "properties": {"action": {"type": "string", "description": "What to confirm"}},
            "required": ["action"]
        }
    }))
    .unwrap_or_else(|e| unreachable!("a valid tool: {e}"))
}

/// One scenario's requests and findings while it runs.
struct Scene {
    scenario: Scenario,
    exchanges: Vec<ExchangeReport>,
    findings: Vec<Finding>,
    note: Option<String>,
    /// Set when the scenario had nothing to judge.
    not_exercised: bool,
}

impl Scene {
    fn violation(&mut self, family: Family, exchange: &str, message: String) {
        self.findings.push(Finding {
            severity: Severity::Violation,
            family,
            rule: family.spec(),
            scenario: self.scenario.name().to_owned(),
            exchange: exchange.to_owned(),
            event_index: None,
            event: None,
            message,
        });
    }

    fn skip(&mut self, why: impl Into<String>) {
        self.not_exercised = true;
        self.note = Some(why.into());
    }
}

/// A finished run scenario's first stream, kept for the resume scenario.
struct Kept {
    input: RunAgentInput,
    exchange: Exchange,
    judged: Judged,
}

/// Runs the scenarios of one check.
pub(crate) struct Runner<'a> {
    check: &'a Check,
    http: reqwest::Client,
    headers: HeaderMap,
    wire: Wire,
    findings: Vec<Finding>,
    exercised: BTreeSet<Family>,
    features: Features,
    seen: BTreeSet<&'static str>,
    first_event_ms: Vec<f64>,
    kept: Option<Kept>,
    /// Something has answered: a later transport failure is a finding, not
    /// an unreachable server.
    reached: bool,
}

impl<'a> Runner<'a> {
    pub(crate) fn new(check: &'a Check, http: reqwest::Client, headers: HeaderMap) -> Self {
        Self {
            check,
            http,
            headers,
            wire: if check.proto { Wire::Proto } else { Wire::Sse },
            findings: Vec::new(),
            exercised: BTreeSet::new(),
            features: Features::default(),
            seen: BTreeSet::new(),
            first_event_ms: Vec::new(),
            kept: None,
            reached: false,
        }
    }

    pub(crate) async fn run(
        mut self,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Report, Error> {
        let started = Instant::now();
        let total = self.check.scenarios.len();
        let mut scenarios = Vec::new();
        for (i, &scenario) in self.check.scenarios.iter().enumerate() {
            progress(Progress::Started {
                index: i + 1,
                total,
                scenario,
            });
            let mut scene = Scene {
                scenario,
                exchanges: Vec::new(),
                findings: Vec::new(),
                note: None,
                not_exercised: false,
            };
            match scenario {
                Scenario::Text => self.text(&mut scene).await?,
                Scenario::History => self.history(&mut scene).await?,
                Scenario::FrontendTools => self.frontend_tools(&mut scene).await?,
                Scenario::State => self.state(&mut scene).await?,
                Scenario::Interrupt => self.interrupt(&mut scene).await?,
                Scenario::Cancel => self.cancel(&mut scene).await?,
                Scenario::BadInput => self.bad_input(&mut scene).await?,
                Scenario::Negotiation => self.negotiation(&mut scene).await?,
                Scenario::Resume => self.resume(&mut scene).await?,
                Scenario::Capabilities => self.capabilities(&mut scene).await?,
            }
            let failed = scene
                .findings
                .iter()
                .any(|f| f.severity == Severity::Violation);
            let verdict = if failed {
                Verdict::Fail
            } else if scene.not_exercised {
                Verdict::NotExercised
            } else {
                Verdict::Pass
            };
            progress(Progress::Finished { scenario, verdict });
            self.findings.append(&mut scene.findings);
            scenarios.push(ScenarioReport {
                name: scenario.name(),
                description: scenario.description(),
                verdict,
                note: scene.note,
                exchanges: scene.exchanges,
            });
        }
        let families = Family::ALL
            .into_iter()
            .map(|family| {
                let of = |s: Severity| {
                    self.findings
                        .iter()
                        .filter(|f| f.family == family && f.severity == s)
                        .count()
                };
                let violations = of(Severity::Violation);
                let verdict = if violations > 0 {
                    Verdict::Fail
                } else if self.exercised.contains(&family) {
                    Verdict::Pass
                } else {
                    Verdict::NotExercised
                };
                FamilyReport {
                    family,
                    spec: family.spec(),
                    verdict,
                    violations,
                    warnings: of(Severity::Warning),
                }
            })
            .collect();
        self.features.seen = self.seen.iter().map(|s| (*s).to_owned()).collect();
        self.first_event_ms.sort_by(f64::total_cmp);
        let median = (!self.first_event_ms.is_empty())
            .then(|| self.first_event_ms[self.first_event_ms.len() / 2]);
        Ok(Report {
            url: self.check.url.clone(),
            wire: match self.wire {
                Wire::Sse => "sse",
                Wire::Proto => "proto",
            },
            scenarios,
            families,
            findings: self.findings,
            features: self.features,
            median_first_event_ms: median,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        })
    }

    /// A new run's input on `thread` (a new thread when `None`).
    fn input(&self, thread: Option<&str>, messages: Vec<Message>) -> RunAgentInput {
        let mut input = RunAgentInput::new(
            thread.map_or_else(|| new_id("check-thread"), str::to_owned),
            new_id("check-run"),
        );
        input.messages = messages;
        input.state = Some(json!({}));
        input.forwarded_props = Some(self.check.forwarded_props.clone());
        input.protocol_version = Some(PROTOCOL_VERSION.to_owned());
        input
    }

    /// Sends one request, noting the exchange; `Err` only when nothing has
    /// ever answered (the server is not there).
    async fn send(&mut self, scene: &mut Scene, label: &str, ask: &Ask) -> Result<Exchange, Error> {
        let exchange = exchange::send(&self.http, &self.headers, ask, self.check.timeout).await;
        if exchange.status.is_none() && !self.reached {
            return Err(Error::Unreachable {
                url: ask.url.clone(),
                reason: exchange.error.unwrap_or_default(),
            });
        }
        self.reached = true;
        let mut request = format!(
            "{label}: {}",
            if ask.body.is_some() { "POST" } else { "GET" }
        );
        if let Some(accept) = &ask.accept {
            request.push_str(&format!(" Accept: {accept}"));
        }
        if let Some(id) = &ask.last_event_id {
            request.push_str(&format!(" Last-Event-ID: {id}"));
        }
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        scene.exchanges.push(ExchangeReport {
            request,
            status: exchange.status,
            content_type: exchange.content_type.clone(),
            events: 0,
            first_event_ms: exchange.first_bytes_after.map(ms),
            events_per_second: None,
            elapsed_ms: ms(exchange.elapsed),
        });
        if exchange.location.is_some() {
            self.features.location = true;
        }
        Ok(exchange)
    }

    /// Judges a streamed answer, collecting its findings and facts into the
    /// scene; the last exchange of the scene is this one.
    fn judge(
        &mut self,
        scene: &mut Scene,
        label: &str,
        input: &RunAgentInput,
        exchange: &Exchange,
        asked: Wire,
    ) -> Judged {
        let judged = exchange::judge(input, exchange, asked);
        for finding in &judged.findings {
            let mut finding = finding.clone();
            finding.scenario = scene.scenario.name().to_owned();
            finding.exchange = label.to_owned();
            scene.findings.push(finding);
        }
        if !judged.events.is_empty() {
            self.exercised.extend(judged.exercised.iter().copied());
        }
        if let Some(report) = scene.exchanges.last_mut() {
            report.events = judged.events.len();
            if let (Some(first), true) = (exchange.first_bytes_after, judged.events.len() > 1) {
                let span = exchange.elapsed.saturating_sub(first).as_secs_f64();
                if span > 0.0 {
                    report.events_per_second = Some(judged.events.len() as f64 / span);
                }
            }
            if let Some(ms) = report.first_event_ms
                && !judged.events.is_empty()
            {
                self.first_event_ms.push(ms);
            }
        }
        if judged.ids.iter().any(Option::is_some) {
            self.features.event_ids = true;
        }
        for event in &judged.events {
            let ty = event["type"].as_str().unwrap_or("");
            if ty == "RUN_STARTED"
                && let Some(v) = event["protocolVersion"].as_str()
            {
                self.features.protocol_version = Some(v.to_owned());
            }
            if let Some(kind) = kind_of(ty) {
                self.seen.insert(kind);
            }
        }
        judged
    }

    /// Posts `input` and judges the stream: the common path of the run
    /// scenarios. `None` when the answer was not a stream (noted).
    async fn run_input(
        &mut self,
        scene: &mut Scene,
        label: &str,
        input: &RunAgentInput,
    ) -> Result<Option<(Exchange, Judged)>, Error> {
        self.run_input_of(scene, label, input, Family::RunInput)
            .await
    }

    /// [`Runner::run_input`] for a follow-up whose refusal breaks the rules
    /// of `family` (a tool answer, a resume).
    async fn run_input_of(
        &mut self,
        scene: &mut Scene,
        label: &str,
        input: &RunAgentInput,
        refused: Family,
    ) -> Result<Option<(Exchange, Judged)>, Error> {
        let ask = Ask {
            body: Some(body_of(input)),
            url: self.check.url.clone(),
            accept: Some(accept_of(self.wire).to_owned()),
            last_event_id: None,
            abort_after_first_bytes: false,
        };
        let exchange = self.send(scene, label, &ask).await?;
        if !self.answered_with_stream(scene, label, &exchange, refused) {
            return Ok(None);
        }
        let judged = self.judge(scene, label, input, &exchange, self.wire);
        Ok(Some((exchange, judged)))
    }

    /// A valid input must get a 2xx stream read to its end.
    fn answered_with_stream(
        &mut self,
        scene: &mut Scene,
        label: &str,
        exchange: &Exchange,
        refused: Family,
    ) -> bool {
        match exchange.status {
            None => {
                scene.violation(
                    Family::Lifecycle,
                    label,
                    format!(
                        "no answer: {}",
                        exchange.error.as_deref().unwrap_or("unknown")
                    ),
                );
                false
            }
            Some(status) if !(200..300).contains(&status) => {
                scene.violation(
                    refused,
                    label,
                    format!(
                        "a valid RunAgentInput was refused with {status}: {}",
                        exchange.body_text()
                    ),
                );
                false
            }
            Some(_) => {
                if let Some(error) = &exchange.error {
                    scene.violation(
                        Family::Lifecycle,
                        label,
                        format!("the stream broke off: {error}"),
                    );
                }
                true
            }
        }
    }

    async fn text(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let input = self.input(
            None,
            vec![user("Hello! Please answer with one short sentence.")],
        );
        if let Some((exchange, judged)) = self.run_input(scene, "run", &input).await? {
            scene.note = Some(describe(&judged));
            self.kept = Some(Kept {
                input,
                exchange,
                judged,
            });
        }
        Ok(())
    }

    async fn history(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let messages = vec![
            user("My name is Ada."),
            message(
                json!({"id": new_id("assistant"), "role": "assistant", "content": "Nice to meet you, Ada!"}),
            ),
            user("What is my name? Answer in one short sentence."),
        ];
        let input = self.input(None, messages);
        if let Some((_, judged)) = self.run_input(scene, "run", &input).await? {
            scene.note = Some(describe(&judged));
        }
        Ok(())
    }

    async fn frontend_tools(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let mut input = self.input(
            None,
            vec![user(
                "Please call the confirm_action tool with action \"archive the report\", then wait for my answer.",
            )],
        );
        input.tools = vec![confirm_tool()];
        let Some((_, judged)) = self.run_input(scene, "run", &input).await? else {
            return Ok(());
        };
        // Calls of the offered tool that no tool message answered.
        let answered: BTreeSet<&str> = judged
            .session
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some(t.tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        let pending: Vec<String> = judged
            .session
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Assistant(a) => a.tool_calls.as_ref(),
                _ => None,
            })
            .flatten()
            .filter(|c| c.function.name == "confirm_action" && !answered.contains(c.id.as_str()))
            .map(|c| c.id.clone())
            .collect();
        if pending.is_empty() {
            scene.skip("the agent called no frontend tool");
            return Ok(());
        }
        if let Some(RunEnd::Finished {
            outcome: RunFinishedOutcome::Interrupt { .. },
            ..
        }) = &judged.session.last_run
        {
            scene.violation(
                Family::ToolCalls,
                "run",
                "a run that hands frontend tool calls to the client ends as success (with pendingToolCallIds), never as an interrupt".to_owned(),
            );
        }
        self.exercised.insert(Family::ToolCalls);
        let mut messages = judged.session.messages.clone();
        for id in &pending {
            messages.push(message(json!({
                "id": new_id("tool"),
                "role": "tool",
                "toolCallId": id,
                "content": "{\"confirmed\":true}"
            })));
        }
        let follow = self.input(Some(&input.thread_id), messages);
        let mut follow = follow;
        follow.tools = vec![confirm_tool()];
        if let Some((_, judged)) = self
            .run_input_of(
                scene,
                "follow-up with the tool's answer",
                &follow,
                Family::ToolCalls,
            )
            .await?
        {
            scene.note = Some(format!(
                "{} call(s) of confirm_action answered; follow-up: {}",
                pending.len(),
                describe(&judged)
            ));
        }
        Ok(())
    }

    async fn state(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let mut input = self.input(
            None,
            vec![user(
                "Add the item \"b\" to the shared state's items and increase count by one.",
            )],
        );
        input.state = Some(json!({"count": 1, "items": ["a"], "checkedBy": "agwire check"}));
        if let Some((_, judged)) = self.run_input(scene, "run", &input).await? {
            if judged.has_type("STATE_") {
                scene.note = Some(format!(
                    "{} state event(s) applied; final state {}",
                    judged
                        .events
                        .iter()
                        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("STATE_")))
                        .count(),
                    short(&judged.session.state.to_string())
                ));
            } else {
                scene.skip("the agent sent no STATE_SNAPSHOT or STATE_DELTA");
            }
        }
        Ok(())
    }

    async fn interrupt(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let input = self.input(
            None,
            vec![user(
                "Send an email to the team saying the report is ready, but ask me for approval first.",
            )],
        );
        let Some((_, judged)) = self.run_input(scene, "run", &input).await? else {
            return Ok(());
        };
        let interrupts = judged.session.pending_interrupts.clone();
        if interrupts.is_empty() {
            scene.skip("the run did not end with an interrupt");
            return Ok(());
        }
        self.exercised.insert(Family::Interrupts);
        let mut follow = self.input(Some(&input.thread_id), judged.session.messages.clone());
        follow.resume = Some(
            interrupts
                .iter()
                .map(|i| ResumeEntry {
                    interrupt_id: i.id.clone(),
                    status: ResumeStatus::Cancelled,
                    payload: None,
                    metadata: None,
                })
                .collect(),
        );
        if let Some((_, judged)) = self
            .run_input_of(scene, "resume (cancelled)", &follow, Family::Interrupts)
            .await?
        {
            scene.note = Some(format!(
                "{} interrupt(s) resumed as cancelled; resume run: {}",
                interrupts.len(),
                describe(&judged)
            ));
        }
        Ok(())
    }

    async fn cancel(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let input = self.input(
            None,
            vec![user(
                "Write a long story about a lighthouse keeper, at least 400 words.",
            )],
        );
        let ask = Ask {
            body: Some(body_of(&input)),
            url: self.check.url.clone(),
            accept: Some(accept_of(self.wire).to_owned()),
            last_event_id: None,
            abort_after_first_bytes: true,
        };
        let aborted = self
            .send(scene, "run, aborted after its first bytes", &ask)
            .await?;
        if !aborted.is_success() {
            self.answered_with_stream(scene, "run", &aborted, Family::RunInput);
            return Ok(());
        }
        let seen = partial_events(self.wire, &aborted);
        if let Some(report) = scene.exchanges.last_mut() {
            report.events = seen.len();
        }
        if aborted.complete
            || seen
                .iter()
                .any(|e| matches!(e["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR")))
        {
            scene.skip("the run ended before the client could abort it");
            return Ok(());
        }
        self.exercised.insert(Family::Cancellation);
        // The thread must take a new run: at once from a server that stopped
        // the aborted one, within the timeout from one that lets it finish.
        let aborted_at = Instant::now();
        let deadline = aborted_at + self.check.timeout;
        let mut refusals = 0u32;
        let mut backoff = Duration::from_millis(50);
        loop {
            let next = self.input(Some(&input.thread_id), vec![user("Say hello.")]);
            let ask = Ask {
                body: Some(body_of(&next)),
                url: self.check.url.clone(),
                accept: Some(accept_of(self.wire).to_owned()),
                last_event_id: None,
                abort_after_first_bytes: false,
            };
            let label = "next run on the thread";
            let exchange = self.send(scene, label, &ask).await?;
            let busy = matches!(exchange.status, Some(409 | 423 | 429 | 503));
            if busy && Instant::now() + backoff < deadline {
                refusals += 1;
                // Only the answer that counts stays in the report.
                scene.exchanges.pop();
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
            if busy {
                scene.violation(
                    Family::Cancellation,
                    label,
                    format!(
                        "after the client aborted, the thread still refused new runs {:.1} s later ({refusals} refusals; last: {} {}): the aborted run did not stop",
                        aborted_at.elapsed().as_secs_f64(),
                        exchange.status.unwrap_or(0),
                        exchange.body_text()
                    ),
                );
                return Ok(());
            }
            if self.answered_with_stream(scene, label, &exchange, Family::Cancellation) {
                let judged = self.judge(scene, label, &next, &exchange, self.wire);
                scene.note = Some(format!(
                    "aborted after {} event(s); the thread took a new run after {:.0} ms ({refusals} refusal(s)): {}",
                    seen.len(),
                    aborted_at.elapsed().as_secs_f64() * 1000.0,
                    describe(&judged)
                ));
            }
            return Ok(());
        }
    }

    async fn bad_input(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let valid = self.input(None, vec![user("Hello!")]);
        let mut wrong_type = serde_json::to_value(&valid).unwrap_or_default();
        wrong_type["messages"] = json!("hello");
        let cases: [(&str, Vec<u8>); 3] = [
            ("a body that is not JSON", b"{\"threadId\": ".to_vec()),
            (
                "a RunAgentInput without threadId and runId",
                br#"{"messages":[],"tools":[],"context":[],"state":{},"forwardedProps":{}}"#
                    .to_vec(),
            ),
            (
                "messages that are a string",
                serde_json::to_vec(&wrong_type).unwrap_or_default(),
            ),
        ];
        for (what, body) in cases {
            let ask = Ask {
                body: Some(body),
                url: self.check.url.clone(),
                accept: Some(accept_of(self.wire).to_owned()),
                last_event_id: None,
                abort_after_first_bytes: false,
            };
            let exchange = self.send(scene, what, &ask).await?;
            match exchange.status {
                Some(status) if (400..500).contains(&status) => {}
                Some(status) if (200..300).contains(&status) => scene.violation(
                    Family::RunInput,
                    what,
                    format!(
                        "{what} was accepted with {status} ({}): a malformed RunAgentInput is refused with a 4xx before any stream",
                        exchange.content_type.as_deref().unwrap_or("no content type")
                    ),
                ),
                Some(status) => scene.violation(
                    Family::RunInput,
                    what,
                    format!(
                        "{what} got {status}: a malformed RunAgentInput is the client's error, answered with a 4xx ({})",
                        exchange.body_text()
                    ),
                ),
                None => scene.violation(
                    Family::RunInput,
                    what,
                    format!(
                        "{what} got no answer ({}): a malformed RunAgentInput is answered with a 4xx",
                        exchange.error.as_deref().unwrap_or("unknown")
                    ),
                ),
            }
        }
        self.exercised.insert(Family::RunInput);
        Ok(())
    }

    async fn negotiation(&mut self, scene: &mut Scene) -> Result<(), Error> {
        self.exercised.insert(Family::Negotiation);
        let mut notes = Vec::new();
        for (accept, asked) in [
            ("application/json", Wire::Sse),
            (PROTO_CONTENT_TYPE, Wire::Proto),
            (SSE_CONTENT_TYPE, Wire::Sse),
        ] {
            let input = self.input(
                None,
                vec![user("Hello! Please answer with one short sentence.")],
            );
            let ask = Ask {
                body: Some(body_of(&input)),
                url: self.check.url.clone(),
                accept: Some(accept.to_owned()),
                last_event_id: None,
                abort_after_first_bytes: false,
            };
            let label = format!("Accept: {accept}");
            let exchange = self.send(scene, &label, &ask).await?;
            if !exchange.is_success() {
                let status = exchange
                    .status
                    .map_or("no answer".to_owned(), |s| s.to_string());
                scene.violation(
                    Family::Negotiation,
                    &label,
                    format!(
                        "Accept: {accept} got {status} ({}): a producer answers SSE whenever Accept does not admit protobuf, and clients MUST always be ready for SSE",
                        exchange.body_text()
                    ),
                );
                continue;
            }
            let judged = self.judge(scene, &label, &input, &exchange, asked);
            let answered = match judged.wire {
                Some(Wire::Proto) => "protobuf",
                _ => "SSE",
            };
            if accept == PROTO_CONTENT_TYPE {
                self.features.protobuf = Some(judged.wire == Some(Wire::Proto));
            }
            notes.push(format!("{accept} → {answered}"));
        }
        scene.note = Some(notes.join("; "));
        Ok(())
    }

    async fn resume(&mut self, scene: &mut Scene) -> Result<(), Error> {
        if self.wire == Wire::Proto {
            scene.skip("protobuf frames carry no event ids");
            return Ok(());
        }
        let kept = match self.kept.take() {
            Some(kept) => kept,
            None => {
                let input = self.input(
                    None,
                    vec![user("Hello! Please answer with one short sentence.")],
                );
                let Some((exchange, judged)) = self.run_input(scene, "run", &input).await? else {
                    return Ok(());
                };
                Kept {
                    input,
                    exchange,
                    judged,
                }
            }
        };
        let events = &kept.judged.events;
        let ids = &kept.judged.ids;
        if kept.judged.wire != Some(Wire::Sse) || !ids.iter().any(Option::is_some) {
            scene.skip("the stream's frames carry no id: (resumption is optional)");
            return Ok(());
        }
        if kept.judged.rejected || events.len() < 2 {
            scene.skip("no complete stream to resume");
            return Ok(());
        }
        // The middle event that has an id.
        let Some(k) = (0..events.len() - 1)
            .rev()
            .filter(|&i| ids[i].is_some())
            .find(|&i| i <= events.len() / 2)
            .or_else(|| (0..events.len() - 1).find(|&i| ids[i].is_some()))
        else {
            scene.skip("no event before the last carries an id");
            return Ok(());
        };
        let last_id = ids[k].clone().unwrap_or_default();
        let (url, body) = match &kept.exchange.location {
            Some(location) => (location.clone(), None),
            None => (self.check.url.clone(), Some(body_of(&kept.input))),
        };
        let ask = Ask {
            body,
            url,
            accept: Some(SSE_CONTENT_TYPE.to_owned()),
            last_event_id: Some(last_id.clone()),
            abort_after_first_bytes: false,
        };
        let label = "resume";
        let exchange = self.send(scene, label, &ask).await?;
        self.exercised.insert(Family::Resumption);
        if !exchange.is_success() {
            scene.violation(
                Family::Resumption,
                label,
                format!(
                    "resuming after id '{last_id}' got {} ({}): a stream whose frames carry ids resumes from Last-Event-ID",
                    exchange.status.map_or("no answer".to_owned(), |s| s.to_string()),
                    exchange.body_text()
                ),
            );
            return Ok(());
        }
        let got = partial_events(Wire::Sse, &exchange);
        if let Some(report) = scene.exchanges.last_mut() {
            report.events = got.len();
        }
        let expected = &events[k + 1..];
        let before = &events[..=k];
        let verdict = if got == expected {
            None
        } else if let Some((i, repeated)) = got.iter().enumerate().find(|(_, e)| before.contains(e))
        {
            Some((
                Some(i),
                format!(
                    "the resumed stream repeats an event the client already had (#{} of the original stream) at position {i}: Last-Event-ID '{last_id}' must give exactly the events after it",
                    before.iter().position(|e| e == repeated).unwrap_or(0)
                ),
            ))
        } else if got.len() < expected.len() && expected.starts_with(&got) {
            Some((
                None,
                format!(
                    "the resumed stream ends after {} of the {} remaining events",
                    got.len(),
                    expected.len()
                ),
            ))
        } else {
            let i = got
                .iter()
                .zip(expected)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(expected.len()));
            Some((
                Some(i),
                format!(
                    "the resumed stream differs from the rest of the original at position {i} ({} events resumed, {} expected)",
                    got.len(),
                    expected.len()
                ),
            ))
        };
        match verdict {
            None => {
                scene.note = Some(format!(
                    "resumed after event #{k} (id '{last_id}') {}: exactly the {} remaining events",
                    if kept.exchange.location.is_some() {
                        "at the Location"
                    } else {
                        "by posting again"
                    },
                    expected.len()
                ));
            }
            Some((index, message)) => scene.findings.push(Finding {
                severity: Severity::Violation,
                family: Family::Resumption,
                rule: Family::Resumption.spec(),
                scenario: scene.scenario.name().to_owned(),
                exchange: label.to_owned(),
                event_index: index,
                event: index.and_then(|i| got.get(i).cloned()),
                message,
            }),
        }
        Ok(())
    }

    async fn capabilities(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let Some(url) = self.check.capabilities.clone() else {
            scene.skip(
                "AG-UI 1.1 leaves where capabilities are published to the server: give --capabilities URL",
            );
            return Ok(());
        };
        let ask = Ask {
            body: None,
            url,
            accept: Some("application/json".to_owned()),
            last_event_id: None,
            abort_after_first_bytes: false,
        };
        let label = "GET capabilities";
        let exchange = self.send(scene, label, &ask).await?;
        self.exercised.insert(Family::Capabilities);
        if !exchange.is_success() {
            scene.violation(
                Family::Capabilities,
                label,
                format!(
                    "the capabilities document answered {}",
                    exchange
                        .status
                        .map_or("nothing".to_owned(), |s| s.to_string())
                ),
            );
            return Ok(());
        }
        let value: Value = match serde_json::from_slice(&exchange.body) {
            Ok(value) => value,
            Err(error) => {
                scene.violation(Family::Capabilities, label, format!("not JSON: {error}"));
                return Ok(());
            }
        };
        match decode::<AgentCapabilities>(value, DecodeMode::Strict) {
            Ok(_) => scene.note = Some("a valid AgentCapabilities document".to_owned()),
            Err(error) => scene.violation(
                Family::Capabilities,
                label,
                format!("not an AgentCapabilities document of the 1.1 schema: {error}"),
            ),
        }
        Ok(())
    }
}

/// The events of a body read in part (an aborted stream, a resumed one):
/// every whole frame, without the end-of-stream rules.
fn partial_events(wire: Wire, exchange: &Exchange) -> Vec<Value> {
    match wire {
        Wire::Sse => {
            let mut decoder = SseDecoder::new();
            let mut frames = Vec::new();
            let _ = decoder.push(&exchange.body, &mut frames);
            if exchange.complete {
                let _ = decoder.finish(&mut frames);
            }
            frames
                .into_iter()
                .map(|f| serde_json::from_str(&f.data).unwrap_or(Value::String(f.data)))
                .collect()
        }
        Wire::Proto => {
            let mut decoder = FrameDecoder::new();
            let mut events = Vec::new();
            let _ = decoder.push(&exchange.body, &mut events);
            events
                .iter()
                .map(|e| serde_json::from_str(&e.to_json()).unwrap_or(Value::Null))
                .collect()
        }
    }
}

fn body_of(input: &RunAgentInput) -> Vec<u8> {
    serde_json::to_vec(input).unwrap_or_default()
}

/// What a run did, in a few words.
fn describe(judged: &Judged) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    for event in &judged.events {
        if let Some(kind) = kind_of(event["type"].as_str().unwrap_or(""))
            && !kinds.contains(&kind)
        {
            kinds.push(kind);
        }
    }
    let end = match &judged.session.last_run {
        Some(RunEnd::Finished { outcome, .. }) => match outcome {
            RunFinishedOutcome::Interrupt { .. } => "interrupted",
            RunFinishedOutcome::Success { .. } => "finished",
            _ => "finished (cancelled)",
        },
        Some(RunEnd::Errored { .. }) => "RUN_ERROR",
        None => "not ended",
    };
    format!(
        "{} events ({}), {end}",
        judged.events.len(),
        kinds.join(", ")
    )
}

/// The kind of feature an event type shows.
fn kind_of(ty: &str) -> Option<&'static str> {
    Some(match ty {
        t if t.starts_with("TEXT_MESSAGE") => "text",
        "TOOL_CALL_RESULT" => "tool results",
        t if t.starts_with("TOOL_CALL") => "tool calls",
        t if t.starts_with("STATE_") => "state",
        "MESSAGES_SNAPSHOT" => "messages snapshot",
        t if t.starts_with("REASONING_") => "reasoning",
        t if t.starts_with("ACTIVITY_") => "activity",
        t if t.starts_with("SUBAGENT_") => "subagents",
        t if t.starts_with("STEP_") => "steps",
        "CUSTOM" | "RAW" => "custom/raw",
        _ => return None,
    })
}

fn short(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
