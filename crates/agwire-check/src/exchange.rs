//! One request and what came back: the bytes as read (with their timing),
//! then the judgement of those bytes by the official client's rules.
//!
//! Reading and judging are separate so that the judge sees exactly the bytes
//! a client would have seen, split nowhere: the SSE framing rules are about
//! bytes (blank lines, LF, UTF-8) that a decoder smooths over.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agwire_codec::negotiate::{PROTO_CONTENT_TYPE, SSE_CONTENT_TYPE};
use agwire_codec::proto::FrameDecoder;
use agwire_codec::sse::SseDecoder;
use agwire_core::apply::Session;
use agwire_core::pipeline::Pipeline;
use agwire_core::{Message, RunAgentInput, WarningKind};
use reqwest::header::{self, HeaderMap, HeaderValue};
use serde_json::Value;

use crate::family::Family;
use crate::report::{Finding, Severity};

/// Most bytes one response body is read to: a conformance run is small, and
/// an endless body must not grow the checker without bound.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// What a request asks for.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    /// `POST` with this body, or `GET` when `None`.
    pub body: Option<Vec<u8>>,
    /// The URL (the target's unless a resume goes to a `Location`).
    pub url: String,
    pub accept: Option<String>,
    pub last_event_id: Option<String>,
    /// Stop reading after the first body bytes (a client that aborts).
    pub abort_after_first_bytes: bool,
}

/// What came back, before any judgement.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    /// `None` when no response arrived (see `error`).
    pub status: Option<u16>,
    /// A transport failure or the timeout, in words.
    pub error: Option<String>,
    pub content_type: Option<String>,
    pub location: Option<String>,
    pub body: Vec<u8>,
    /// Response headers arrived after this long.
    pub head_after: Option<Duration>,
    /// The first body bytes arrived after this long.
    pub first_bytes_after: Option<Duration>,
    pub elapsed: Duration,
    /// The body was read to its end (not cut by the timeout, an error or an
    /// abort).
    pub complete: bool,
}

impl Exchange {
    pub(crate) fn is_success(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// The body as text, for an error answer.
    pub(crate) fn body_text(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let text = text.trim();
        match text.char_indices().nth(200) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        }
    }
}

/// Sends `ask` and reads the answer within `timeout`.
pub(crate) async fn send(
    http: &reqwest::Client,
    headers: &HeaderMap,
    ask: &Ask,
    timeout: Duration,
) -> Exchange {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut exchange = Exchange {
        status: None,
        error: None,
        content_type: None,
        location: None,
        body: Vec::new(),
        head_after: None,
        first_bytes_after: None,
        elapsed: Duration::ZERO,
        complete: false,
    };
    let mut request = match &ask.body {
        Some(body) => http
            .post(&ask.url)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.clone()),
        None => http.get(&ask.url),
    }
    .headers(headers.clone());
    if let Some(accept) = &ask.accept {
        request = request.header(header::ACCEPT, accept);
    }
    if let Some(id) = &ask.last_event_id {
        request = request.header("last-event-id", id);
    }
    let response = match tokio::time::timeout_at(deadline, request.send()).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => {
            exchange.error = Some(format!("request failed: {}", error_chain(&error)));
            exchange.elapsed = started.elapsed();
            return exchange;
        }
        Err(_) => {
            exchange.error = Some(format!("no response within {}", seconds(timeout)));
            exchange.elapsed = started.elapsed();
            return exchange;
        }
    };
    exchange.head_after = Some(started.elapsed());
    exchange.status = Some(response.status().as_u16());
    let text = |value: Option<&HeaderValue>| value.and_then(|v| v.to_str().ok()).map(str::to_owned);
    exchange.content_type = text(response.headers().get(header::CONTENT_TYPE));
    exchange.location = text(response.headers().get(header::LOCATION))
        .and_then(|l| response.url().join(&l).ok())
        .map(String::from);
    let mut response = response;
    loop {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                exchange
                    .first_bytes_after
                    .get_or_insert_with(|| started.elapsed());
                exchange.body.extend_from_slice(&chunk);
                if ask.abort_after_first_bytes {
                    // Dropping the response closes the connection: the abort.
                    break;
                }
                if exchange.body.len() > MAX_BODY {
                    exchange.error = Some(format!("body exceeds {MAX_BODY} bytes"));
                    break;
                }
            }
            Ok(Ok(None)) => {
                exchange.complete = true;
                break;
            }
            Ok(Err(error)) => {
                exchange.error = Some(format!("body failed: {}", error_chain(&error)));
                break;
            }
            Err(_) => {
                exchange.error = Some(format!(
                    "the body did not end within {} (a run that never ends, or a stream that stalls)",
                    seconds(timeout)
                ));
                break;
            }
        }
    }
    exchange.elapsed = started.elapsed();
    exchange
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// An error with its sources (reqwest's own message hides the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Which binding the answer used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    Sse,
    Proto,
}

/// A stream judged event by event.
#[derive(Debug)]
pub(crate) struct Judged {
    /// Every event decoded from the body, in order, as JSON.
    pub events: Vec<Value>,
    /// The SSE `id` in effect for each event (`None` for protobuf).
    pub ids: Vec<Option<String>>,
    pub findings: Vec<Finding>,
    /// Families the events gave something to judge.
    pub exercised: BTreeSet<Family>,
    /// What the official client would hold at the end.
    pub session: Session,
    /// The client rejected the stream.
    pub rejected: bool,
    pub wire: Option<Wire>,
}

impl Judged {
    /// Event types, for "did the agent do X" questions.
    pub(crate) fn has_type(&self, prefix: &str) -> bool {
        self.events
            .iter()
            .any(|e| e["type"].as_str().is_some_and(|t| t.starts_with(prefix)))
    }
}

/// Judges a streamed answer to `input`, which asked for `asked`.
pub(crate) fn judge(input: &RunAgentInput, exchange: &Exchange, asked: Wire) -> Judged {
    let mut judge = Judge::new(input);
    let content_type = exchange.content_type.as_deref().unwrap_or("");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let wire = if content_type == PROTO_CONTENT_TYPE {
        if asked == Wire::Sse {
            judge.violation(
                Family::Negotiation,
                None,
                format!(
                    "answered {PROTO_CONTENT_TYPE} to a client whose Accept names only {SSE_CONTENT_TYPE}: a producer MUST answer SSE unless Accept admits protobuf"
                ),
            );
        }
        Wire::Proto
    } else if essence == PROTO_CONTENT_TYPE {
        judge.violation(
            Family::Protobuf,
            None,
            format!(
                "content type '{content_type}': the official client selects protobuf only on exactly '{PROTO_CONTENT_TYPE}' (no parameters), so it would read these frames as SSE"
            ),
        );
        Wire::Proto
    } else if essence == SSE_CONTENT_TYPE {
        if content_type != SSE_CONTENT_TYPE {
            judge.warning(
                Family::Sse,
                None,
                format!(
                    "content type '{content_type}' carries parameters; the official SDKs send exactly '{SSE_CONTENT_TYPE}' (clients still read it as SSE)"
                ),
            );
        }
        Wire::Sse
    } else {
        judge.violation(
            Family::Sse,
            None,
            format!(
                "content type '{content_type}' on a 2xx stream: the SSE binding answers '{SSE_CONTENT_TYPE}' (the official client would try to read it as SSE)"
            ),
        );
        Wire::Sse
    };
    judge.judged.wire = Some(wire);
    match wire {
        Wire::Sse => judge.sse(&exchange.body),
        Wire::Proto => judge.proto(&exchange.body),
    }
    if exchange.complete {
        judge.end();
    }
    judge.judged.session = judge.pipeline.session().clone();
    judge.judged
}

struct Judge {
    pipeline: Pipeline,
    judged: Judged,
    /// A run is open (started, not yet ended).
    open_run: bool,
    /// Tool call ids the conversation or the stream has named.
    tool_calls: BTreeSet<String>,
}

impl Judge {
    fn new(input: &RunAgentInput) -> Self {
        let mut tool_calls = BTreeSet::new();
        for message in &input.messages {
            if let Message::Assistant(m) = message {
                for call in m.tool_calls.iter().flatten() {
                    tool_calls.insert(call.id.clone());
                }
            }
        }
        Self {
            pipeline: Pipeline::for_input(input).checking_thread(),
            judged: Judged {
                events: Vec::new(),
                ids: Vec::new(),
                findings: Vec::new(),
                exercised: BTreeSet::new(),
                session: Session::new(Vec::new(), Value::Null),
                rejected: false,
                wire: None,
            },
            open_run: false,
            tool_calls,
        }
    }

    fn finding(
        &mut self,
        severity: Severity,
        family: Family,
        index: Option<usize>,
        message: String,
    ) {
        let event = index.and_then(|i| self.judged.events.get(i).cloned());
        self.judged.findings.push(Finding {
            severity,
            family,
            rule: family.spec(),
            scenario: String::new(),
            exchange: String::new(),
            event_index: index,
            event,
            message,
        });
    }

    fn violation(&mut self, family: Family, index: Option<usize>, message: String) {
        self.finding(Severity::Violation, family, index, message);
    }

    fn warning(&mut self, family: Family, index: Option<usize>, message: String) {
        self.finding(Severity::Warning, family, index, message);
    }

    /// The byte-level rules of the SSE binding, then every frame through the
    /// official client's pipeline.
    fn sse(&mut self, body: &[u8]) {
        self.judged.exercised.insert(Family::Sse);
        let text = match std::str::from_utf8(body) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(error) => {
                self.violation(
                    Family::Sse,
                    None,
                    format!(
                        "the body is not UTF-8 (invalid byte at offset {}): an event stream is always UTF-8",
                        error.valid_up_to()
                    ),
                );
                String::from_utf8_lossy(body)
            }
        };
        if let Some(at) = text.find('\r') {
            self.violation(
                Family::Sse,
                None,
                format!(
                    "CR in the stream (byte offset {at}): AG-UI's SSE lines MUST end with LF only (the 1.0 client does not split on CRLF)"
                ),
            );
        }
        let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
        let mut frame = 0usize;
        for block in normalized.split("\n\n") {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() {
                continue;
            }
            let whole_events = data
                .iter()
                .filter(|d| serde_json::from_str::<Value>(d).is_ok_and(|v| v.get("type").is_some()))
                .count();
            if data.len() > 1 && whole_events > 1 {
                self.violation(
                    Family::Sse,
                    None,
                    format!(
                        "frame {} holds {} events on consecutive data lines: a frame is missing its blank line, so a client joins them into one frame that is not JSON",
                        frame + 1,
                        data.len()
                    ),
                );
            }
            frame += 1;
        }
        let trimmed = normalized.trim_end_matches(['\n']);
        if !trimmed.is_empty() && !normalized.ends_with("\n\n") {
            let last_line = trimmed.rsplit('\n').next().unwrap_or("");
            if last_line.starts_with("data:") {
                self.violation(
                    Family::Sse,
                    None,
                    "the last frame does not end with a blank line (each event is `data: <json>` followed by an empty line)".to_owned(),
                );
            }
        }

        let mut decoder = SseDecoder::new();
        let mut frames = Vec::new();
        let framing = decoder
            .push(body, &mut frames)
            .and_then(|()| decoder.finish(&mut frames));
        for frame in frames {
            if self.judged.rejected {
                // The client stops at its first rejection; the rest is only
                // counted.
                self.judged
                    .events
                    .push(serde_json::from_str(&frame.data).unwrap_or(Value::String(frame.data)));
                self.judged.ids.push(frame.id);
                continue;
            }
            let value: Value = match serde_json::from_str(&frame.data) {
                Ok(value) => value,
                Err(error) => {
                    let index = self.judged.events.len();
                    self.judged.events.push(Value::String(frame.data));
                    self.judged.ids.push(frame.id);
                    self.violation(
                        Family::Sse,
                        Some(index),
                        format!("a frame's data is not JSON ({error}); the official client fails the run here"),
                    );
                    self.judged.rejected = true;
                    continue;
                }
            };
            self.judged.ids.push(frame.id);
            self.event(value);
        }
        if let Err(error) = framing {
            self.violation(
                Family::Sse,
                None,
                format!("the event stream cannot be read: {error}"),
            );
            self.judged.rejected = true;
        }
    }

    /// Length-prefixed protobuf frames, then the same pipeline.
    fn proto(&mut self, body: &[u8]) {
        self.judged.exercised.insert(Family::Protobuf);
        let mut decoder = FrameDecoder::new();
        let mut events = Vec::new();
        let framing = decoder
            .push(body, &mut events)
            .and_then(|()| decoder.finish());
        for event in events {
            let value: Value = serde_json::from_str(&event.to_json()).unwrap_or(Value::Null);
            self.judged.ids.push(None);
            if self.judged.rejected {
                self.judged.events.push(value);
                continue;
            }
            self.event(value);
        }
        if let Err(error) = framing {
            self.violation(
                Family::Protobuf,
                None,
                format!("the protobuf frames cannot be read: {error}"),
            );
            self.judged.rejected = true;
        }
    }

    /// One event through the official client's pipeline, and the producer
    /// rules the client does not enforce.
    fn event(&mut self, value: Value) {
        let index = self.judged.events.len();
        let ty = value["type"].as_str().map(str::to_owned);
        self.judged.events.push(value.clone());
        self.exercise(&value);
        if let Some(ty) = ty.as_deref() {
            self.producer_rules(ty, &value, index);
        }
        match self.pipeline.push_value(value) {
            Ok(_) => {}
            Err(error) => {
                let family = Family::of_rejection(ty.as_deref(), &error);
                self.violation(
                    family,
                    Some(index),
                    format!("the official client rejects the stream here: {error}"),
                );
                self.judged.rejected = true;
            }
        }
        for warning in self.pipeline.take_warnings() {
            let (severity, family) = match warning.kind {
                // A producer whose patch does not apply broke the state (or
                // activity) it promised; the client only keeps going.
                WarningKind::StatePatchFailed => (Severity::Violation, Family::State),
                WarningKind::ActivityPatchFailed => (Severity::Violation, Family::Activity),
                // A declaration outside the MAJOR.MINOR grammar breaks the
                // versioning rules; a newer one is only worth a warning.
                WarningKind::ProtocolVersion if warning.message.contains("cannot interpret") => {
                    (Severity::Violation, Family::Versioning)
                }
                WarningKind::ProtocolVersion => (Severity::Warning, Family::Versioning),
                WarningKind::MissingTarget => (Severity::Violation, family_of_type(ty.as_deref())),
                _ => (Severity::Warning, Family::Processing),
            };
            self.finding(severity, family, Some(index), warning.message);
        }
    }

    /// What the events give each family to judge.
    fn exercise(&mut self, value: &Value) {
        let exercised = &mut self.judged.exercised;
        exercised.insert(Family::Processing);
        let ty = value["type"].as_str().unwrap_or("");
        exercised.insert(family_of_type(Some(ty)));
        if ty.starts_with("TOOL_CALL") {
            exercised.insert(Family::ToolCalls);
        }
        if ty == "MESSAGES_SNAPSHOT" {
            exercised.insert(Family::State);
        }
        if value.get("subagentRunId").is_some() {
            exercised.insert(Family::Subagents);
        }
        if ty == "RUN_STARTED" && value.get("protocolVersion").is_some() {
            exercised.insert(Family::Versioning);
        }
    }

    /// Rules about the producer that the consumer pipeline tolerates.
    fn producer_rules(&mut self, ty: &str, value: &Value, index: usize) {
        match ty {
            "RUN_STARTED" => self.open_run = true,
            "RUN_FINISHED" | "RUN_ERROR" => self.open_run = false,
            "TOOL_CALL_START" | "TOOL_CALL_CHUNK" => {
                if let Some(id) = value["toolCallId"].as_str() {
                    self.tool_calls.insert(id.to_owned());
                }
            }
            "TOOL_CALL_RESULT" => {
                let id = value["toolCallId"].as_str().unwrap_or("");
                if !self.tool_calls.contains(id) {
                    self.violation(
                        Family::ToolCalls,
                        Some(index),
                        format!(
                            "TOOL_CALL_RESULT for toolCallId '{id}', which no tool call of this stream or of the input's messages has"
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    /// The body ended: a run still open is a truncated run.
    fn end(&mut self) {
        if self.judged.rejected {
            return;
        }
        if self.judged.events.is_empty() {
            self.violation(
                Family::Lifecycle,
                None,
                "the stream ended without any event (a 2xx answer must carry the run)".to_owned(),
            );
        } else if self.open_run {
            self.violation(
                Family::Lifecycle,
                None,
                "the stream ended while its run was open: a truncated run (no RUN_FINISHED or RUN_ERROR), which a client MUST NOT report as success".to_owned(),
            );
        }
    }
}

/// The family an event type belongs to.
fn family_of_type(ty: Option<&str>) -> Family {
    let ty = ty.unwrap_or("");
    if ty.starts_with("RUN_") || ty.starts_with("STEP_") {
        Family::Lifecycle
    } else if ty == "TOOL_CALL_RESULT" {
        Family::ToolCalls
    } else if ty.starts_with("TEXT_MESSAGE") || ty.starts_with("TOOL_CALL") {
        Family::Streaming
    } else if ty.starts_with("STATE_") || ty == "MESSAGES_SNAPSHOT" {
        Family::State
    } else if ty.starts_with("REASONING_") || ty.starts_with("THINKING_") {
        Family::Reasoning
    } else if ty.starts_with("ACTIVITY_") {
        Family::Activity
    } else if ty.starts_with("SUBAGENT_") {
        Family::Subagents
    } else {
        Family::Processing
    }
}
