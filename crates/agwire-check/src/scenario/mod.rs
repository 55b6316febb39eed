//! The scenarios: what each sends, and how its answers are judged.
//!
//! An arbitrary agent cannot be made to follow a prompt, so a scenario that
//! needs the agent to do something (call a tool, touch the state, interrupt)
//! judges what the agent did and says "not exercised" when it did not.
//!
//! Here: the scenario list and the runner's common path (send, judge, the
//! report); the scenarios themselves in `conversation.rs` (text, history,
//! frontend tools, state, interrupts) and `transport.rs` (cancel, bad
//! input, negotiation, resume, capabilities).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agwire_codec::negotiate::{PROTO_CONTENT_TYPE, SSE_CONTENT_TYPE};
use agwire_codec::proto::FrameDecoder;
use agwire_codec::sse::SseDecoder;
use agwire_core::apply::RunEnd;
use agwire_core::{Message, PROTOCOL_VERSION, RunAgentInput, RunFinishedOutcome, Tool};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::exchange::{self, Ask, Exchange, Judged, Wire};
use crate::family::Family;
use crate::report::{
    ExchangeReport, FamilyReport, Features, Finding, Report, ScenarioReport, Severity, Verdict,
};
use crate::{Check, Error, Progress};

mod conversation;
mod transport;

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
