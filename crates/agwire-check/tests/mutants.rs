//! A server of ours that speaks AG-UI correctly at `/good` and breaks one rule
//! at `/<mutant>`: the kit must pass the first and catch each mutant with the
//! right rule family, and the mutants cover every family the kit reports.
//!
//! The good agent's every run shows each event family (steps, reasoning,
//! text, chunks, a backend tool call and its result, activity, a subagent,
//! state when the input has one, a frontend tool call when one is offered, an
//! interrupt when asked for approval), so a mutant can break any of them. Its
//! SSE frames carry `id:` lines and a reconnect with `Last-Event-ID` replays
//! the rest; it answers protobuf when `Accept` admits it; a run holds its
//! thread until the client disconnects.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // helpers outside #[test] fns; tables printed

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agwire_check::{Check, Family, Report, Scenario, Verdict};
use agwire_codec::negotiate::{Negotiator, WireFormat};
use agwire_core::Event;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// One rule broken on purpose, and the family the kit must name.
const MUTANTS: &[(&str, Family)] = &[
    ("no-run-finished", Family::Lifecycle),
    ("events-after-run-error", Family::Lifecycle),
    ("thread-mismatch", Family::Lifecycle),
    ("open-message-at-finish", Family::Lifecycle),
    ("content-before-start", Family::Streaming),
    ("chunk-without-id", Family::Streaming),
    ("tool-result-unknown-call", Family::ToolCalls),
    ("frontend-tool-interrupts", Family::ToolCalls),
    ("bad-json-patch", Family::State),
    ("reasoning-content-without-start", Family::Reasoning),
    ("bad-activity-patch", Family::Activity),
    ("subagent-finished-unstarted", Family::Subagents),
    ("malformed-known-field", Family::Processing),
    ("uninterpretable-version", Family::Versioning),
    ("resume-refused", Family::Interrupts),
    ("accepts-bad-input", Family::RunInput),
    ("wrong-content-type", Family::Sse),
    ("frame-without-blank-line", Family::Sse),
    ("crlf-line-endings", Family::Sse),
    ("not-utf8", Family::Sse),
    ("refuses-unknown-accept", Family::Negotiation),
    ("proto-to-sse-client", Family::Negotiation),
    ("truncated-proto-frame", Family::Protobuf),
    ("ignores-cancellation", Family::Cancellation),
    ("resume-repeats-event", Family::Resumption),
    ("resume-skips-event", Family::Resumption),
    ("invalid-capabilities", Family::Capabilities),
];

#[derive(Default)]
struct Shared {
    /// Frames of every run, by run id, for `Last-Event-ID`.
    runs: Mutex<HashMap<String, Vec<Bytes>>>,
    /// Threads with a run in progress.
    busy: Mutex<HashSet<String>>,
}

type App = Arc<Shared>;

/// Frees its thread when the response body is dropped: at the end of the
/// run, or when the client leaves (unless the run ignores that and goes on
/// for a minute, holding the thread).
struct Holding {
    app: App,
    thread: String,
    finished: bool,
    ignores_cancellation: bool,
}

impl Holding {
    /// The run ended: the thread is free whatever the mutant.
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        if self.ignores_cancellation && !self.finished {
            let (app, thread) = (self.app.clone(), std::mem::take(&mut self.thread));
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(60)).await;
                app.busy.lock().unwrap().remove(&thread);
            });
            return;
        }
        self.app.busy.lock().unwrap().remove(&self.thread);
    }
}

fn detail(status: StatusCode, text: &str) -> Response {
    (status, axum::Json(json!({"detail": text}))).into_response()
}

fn last_user_text(input: &Value) -> String {
    input["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned()
}

/// The good agent's events for `input`, then the mutant's change.
fn events(mutant: &str, input: &Value) -> Vec<Value> {
    let thread = input["threadId"].as_str().unwrap_or("");
    let run = input["runId"].as_str().unwrap_or("");
    let id = |what: &str| format!("{run}-{what}");
    let mut out = vec![
        json!({"type": "RUN_STARTED", "threadId": thread, "runId": run, "protocolVersion": "1.1"}),
    ];
    out.push(json!({"type": "STEP_STARTED", "stepName": "answer"}));
    out.push(json!({"type": "REASONING_START", "messageId": id("span")}));
    out.push(
        json!({"type": "REASONING_MESSAGE_START", "messageId": id("thought"), "role": "reasoning"}),
    );
    out.push(json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": id("thought"), "delta": "thinking"}));
    out.push(json!({"type": "REASONING_MESSAGE_END", "messageId": id("thought")}));
    out.push(json!({"type": "REASONING_END", "messageId": id("span")}));
    out.push(json!({"type": "TEXT_MESSAGE_START", "messageId": id("text"), "role": "assistant"}));
    out.push(
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id("text"), "delta": "You said: "}),
    );
    out.push(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id("text"), "delta": last_user_text(input)}));
    out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": id("text")}));
    out.push(json!({"type": "TOOL_CALL_START", "toolCallId": id("lookup"), "toolCallName": "lookup", "parentMessageId": id("text")}));
    out.push(
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": id("lookup"), "delta": "{\"q\":\"x\"}"}),
    );
    out.push(json!({"type": "TOOL_CALL_END", "toolCallId": id("lookup")}));
    out.push(json!({"type": "TOOL_CALL_RESULT", "messageId": id("result"), "toolCallId": id("lookup"), "content": "found"}));
    out.push(json!({"type": "ACTIVITY_SNAPSHOT", "messageId": id("activity"), "activityType": "search", "content": {"found": 0}}));
    out.push(json!({"type": "ACTIVITY_DELTA", "messageId": id("activity"), "activityType": "search", "patch": [{"op": "replace", "path": "/found", "value": 1}]}));
    out.push(json!({"type": "SUBAGENT_STARTED", "subagentRunId": id("sub"), "name": "helper"}));
    out.push(json!({"type": "TEXT_MESSAGE_START", "messageId": id("sub-text"), "role": "assistant", "subagentRunId": id("sub")}));
    out.push(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id("sub-text"), "delta": "helped", "subagentRunId": id("sub")}));
    out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": id("sub-text"), "subagentRunId": id("sub")}));
    out.push(json!({"type": "SUBAGENT_FINISHED", "subagentRunId": id("sub")}));
    out.push(json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": id("chunk"), "role": "assistant", "delta": "Done."}));
    out.push(json!({"type": "STEP_FINISHED", "stepName": "answer"}));
    if input["state"].as_object().is_some_and(|s| !s.is_empty()) {
        out.push(json!({"type": "STATE_SNAPSHOT", "snapshot": input["state"]}));
        out.push(json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/seen", "value": true}]}));
    }
    let offered = input["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["name"] == "confirm_action"));
    let answered = input["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool");
    let mut outcome = None;
    if offered && !answered {
        out.push(json!({"type": "TOOL_CALL_START", "toolCallId": id("confirm"), "toolCallName": "confirm_action"}));
        out.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": id("confirm"), "delta": "{\"action\":\"archive\"}"}));
        out.push(json!({"type": "TOOL_CALL_END", "toolCallId": id("confirm")}));
        if mutant == "frontend-tool-interrupts" {
            outcome = Some(
                json!({"type": "interrupt", "interrupts": [{"id": id("wrong"), "reason": "tool"}]}),
            );
        }
    }
    if input.get("resume").is_none() && last_user_text(input).contains("approval") {
        outcome = Some(
            json!({"type": "interrupt", "interrupts": [{"id": id("approval"), "reason": "confirmation"}]}),
        );
    }
    let mut finished = json!({"type": "RUN_FINISHED", "threadId": thread, "runId": run});
    if let Some(outcome) = outcome {
        finished["outcome"] = outcome;
    }
    out.push(finished);
    mutate(mutant, &mut out);
    out
}

fn position(events: &[Value], ty: &str) -> usize {
    events.iter().position(|e| e["type"] == ty).unwrap()
}

/// The mutant's change to a good run.
fn mutate(mutant: &str, events: &mut Vec<Value>) {
    match mutant {
        "no-run-finished" => {
            events.pop();
        }
        "events-after-run-error" => {
            let end = events.len() - 1;
            events[end] = json!({"type": "RUN_ERROR", "message": "failed"});
            events.push(
                json!({"type": "TEXT_MESSAGE_START", "messageId": "late", "role": "assistant"}),
            );
        }
        "thread-mismatch" => events[0]["threadId"] = json!("another-thread"),
        "open-message-at-finish" => {
            let end = position(events, "TEXT_MESSAGE_END");
            events.remove(end);
        }
        "content-before-start" => {
            let start = position(events, "TEXT_MESSAGE_START");
            events.swap(start, start + 1);
        }
        "chunk-without-id" => {
            let chunk = position(events, "TEXT_MESSAGE_CHUNK");
            events[chunk].as_object_mut().unwrap().remove("messageId");
        }
        "tool-result-unknown-call" => {
            let result = position(events, "TOOL_CALL_RESULT");
            events[result]["toolCallId"] = json!("no-such-call");
        }
        "bad-json-patch" => {
            if let Some(delta) = events.iter_mut().find(|e| e["type"] == "STATE_DELTA") {
                delta["delta"] = json!([{"op": "replace", "path": "/missing/deep", "value": 1}]);
            }
        }
        "reasoning-content-without-start" => {
            let start = position(events, "REASONING_MESSAGE_START");
            events.remove(start);
        }
        "bad-activity-patch" => {
            let delta = position(events, "ACTIVITY_DELTA");
            events[delta]["patch"] = json!([{"op": "remove", "path": "/nothing"}]);
        }
        "subagent-finished-unstarted" => {
            let start = position(events, "SUBAGENT_STARTED");
            events.remove(start);
            // Its messages would otherwise name an unstarted subagent first.
            for e in events.iter_mut() {
                if e["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("TEXT_MESSAGE"))
                {
                    e.as_object_mut().unwrap().remove("subagentRunId");
                }
            }
        }
        "malformed-known-field" => {
            let content = position(events, "TEXT_MESSAGE_CONTENT");
            events[content]["delta"] = json!(7);
        }
        "uninterpretable-version" => events[0]["protocolVersion"] = json!("v1"),
        _ => {}
    }
}

async fn capabilities(Path(mutant): Path<String>) -> Response {
    if mutant == "invalid-capabilities" {
        return axum::Json(json!({"tools": {"supported": "yes"}})).into_response();
    }
    axum::Json(json!({
        "identity": {"name": "good"},
        "transport": {"streaming": true},
        "tools": {"supported": true, "clientProvided": true},
        "state": {"snapshots": true, "deltas": true},
        "reasoning": {"supported": true}
    }))
    .into_response()
}

async fn run(
    State(app): State<App>,
    Path(mutant): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let input: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) if mutant != "accepts-bad-input" => {
            return detail(StatusCode::BAD_REQUEST, "body is not JSON");
        }
        Err(_) => json!({}),
    };
    let valid = input["threadId"].is_string()
        && input["runId"].is_string()
        && input.get("messages").is_none_or(Value::is_array);
    if !valid && mutant != "accepts-bad-input" {
        return detail(StatusCode::UNPROCESSABLE_ENTITY, "invalid RunAgentInput");
    }
    if mutant == "refuses-unknown-accept" && accept.as_deref() == Some("application/json") {
        return detail(StatusCode::NOT_ACCEPTABLE, "unsupported Accept");
    }
    if mutant == "resume-refused" && input.get("resume").is_some() {
        return detail(StatusCode::UNPROCESSABLE_ENTITY, "resume is not supported");
    }
    let thread = input["threadId"].as_str().unwrap_or("").to_owned();
    let run = input["runId"].as_str().unwrap_or("").to_owned();

    // A reconnect: the rest of a known run.
    if let Some(last) = headers.get("last-event-id").and_then(|v| v.to_str().ok()) {
        let frames = app.runs.lock().unwrap().get(&run).cloned();
        let (Some(frames), Some(index)) = (
            frames,
            last.rsplit(':')
                .next()
                .and_then(|i| i.parse::<usize>().ok()),
        ) else {
            return detail(StatusCode::NOT_FOUND, "unknown run");
        };
        let from = match mutant.as_str() {
            "resume-repeats-event" => index,
            "resume-skips-event" => index + 2,
            _ => index + 1,
        };
        let rest: Vec<Bytes> = frames.into_iter().skip(from).collect();
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from(rest.concat()))
            .unwrap();
    }

    if !app.busy.lock().unwrap().insert(thread.clone()) {
        return detail(StatusCode::CONFLICT, "the thread already has an active run");
    }
    let holding = Holding {
        app: app.clone(),
        thread,
        finished: false,
        ignores_cancellation: mutant == "ignores-cancellation",
    };

    let events = events(&mutant, &input);
    // Events the schema rejects have no protobuf form: such a mutant
    // answers SSE, as a producer that cannot encode protobuf must.
    let encodable = events.iter().all(|e| Event::from_value(e.clone()).is_ok());
    let mut format = if encodable {
        Negotiator::new().choose(accept.as_deref())
    } else {
        WireFormat::Sse
    };
    if mutant == "proto-to-sse-client" {
        format = WireFormat::Protobuf;
    }
    let (content_type, frames) = if format == WireFormat::Protobuf {
        let mut frames = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let event = Event::from_value(event.clone()).unwrap().value;
            let mut out = Vec::new();
            agwire_codec::proto::encode_frame(&event, &mut out).unwrap();
            if mutant == "truncated-proto-frame" && i == events.len() - 1 {
                out.truncate(out.len() - 2);
            }
            frames.push(Bytes::from(out));
        }
        ("application/vnd.ag-ui.event+proto", frames)
    } else {
        let mut frames = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let ending = if mutant == "frame-without-blank-line" && i == 2 {
                "\n"
            } else {
                "\n\n"
            };
            let mut frame = format!("id: {run}:{i}\ndata: {event}{ending}");
            if mutant == "crlf-line-endings" {
                frame = frame.replace('\n', "\r\n");
            }
            let mut bytes = frame.into_bytes();
            // Inside a text delta, so that the JSON survives a lossy decoder
            // and the broken byte is the only fault.
            if mutant == "not-utf8"
                && let Some(at) = bytes.windows(9).position(|w| w == b"You said:")
            {
                bytes.insert(at + 3, 0xff);
            }
            frames.push(Bytes::from(bytes));
        }
        let content_type = if mutant == "wrong-content-type" {
            "application/json"
        } else {
            "text/event-stream"
        };
        (content_type, frames)
    };
    app.runs.lock().unwrap().insert(run, frames.clone());

    // The first frame, then a pause long enough for a client to abort
    // mid-stream, then the rest; the body holds the thread until dropped.
    let stream = futures_util::stream::unfold(
        (frames.into_iter(), 0usize, holding),
        |(mut frames, sent, mut holding)| async move {
            if sent == 1 {
                tokio::time::sleep(Duration::from_millis(60)).await;
            }
            let Some(frame) = frames.next() else {
                holding.finish();
                return None;
            };
            Some((Ok::<_, std::io::Error>(frame), (frames, sent + 1, holding)))
        },
    );
    Response::builder()
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn serve() -> String {
    let app = axum::Router::new()
        .route("/{mutant}", post(run))
        .route("/{mutant}/capabilities", get(capabilities))
        .with_state(App::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn check(base: &str, mutant: &str) -> Check {
    Check::new(format!("{base}/{mutant}"))
        .capabilities_url(format!("{base}/{mutant}/capabilities"))
        .timeout(Duration::from_secs(2))
}

fn violated(report: &Report) -> Vec<Family> {
    let mut families: Vec<Family> = report.violations().map(|v| v.family).collect();
    families.sort();
    families.dedup();
    families
}

#[tokio::test]
async fn the_good_server_passes_every_scenario_and_exercises_every_family() {
    let base = serve().await;
    for proto in [false, true] {
        let report = check(&base, "good").proto(proto).run().await.unwrap();
        assert!(report.passed(), "{}", report.to_table());
        for scenario in &report.scenarios {
            let skipped = proto && scenario.name == "resume";
            assert_eq!(
                scenario.verdict,
                if skipped {
                    Verdict::NotExercised
                } else {
                    Verdict::Pass
                },
                "{}",
                report.to_table()
            );
        }
        // The negotiation scenario judges both bindings whatever the runs
        // ask for; protobuf frames carry no ids to resume from.
        for family in &report.families {
            let expected = if proto && family.family == Family::Resumption {
                Verdict::NotExercised
            } else {
                Verdict::Pass
            };
            assert_eq!(
                family.verdict,
                expected,
                "{:?}\n{}",
                family.family,
                report.to_table()
            );
        }
        assert_eq!(report.features.protobuf, Some(true));
        assert!(report.features.event_ids);
        assert_eq!(report.features.protocol_version.as_deref(), Some("1.1"));
    }
}

#[tokio::test]
async fn each_mutant_is_caught_with_the_family_of_the_rule_it_breaks() {
    let base = serve().await;
    let reports = futures_util::future::join_all(MUTANTS.iter().map(|&(mutant, _)| {
        let proto = mutant == "truncated-proto-frame";
        let check = check(&base, mutant).proto(proto);
        async move { check.run().await }
    }))
    .await;
    let mut missed = Vec::new();
    for (&(mutant, family), report) in MUTANTS.iter().zip(reports) {
        let report = report.unwrap();
        let found = violated(&report);
        println!("{mutant}: {found:?}");
        if found != [family] {
            missed.push(format!(
                "{mutant}: expected only {family}, found {found:?}\n{}",
                report.to_table()
            ));
        }
        let named = report
            .violations()
            .find(|v| v.family == family)
            .map(|v| v.rule);
        if found.contains(&family) {
            assert_eq!(named, Some(family.spec()));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n\n"));
}

#[test]
fn the_mutants_cover_every_rule_family() {
    for family in Family::ALL {
        assert!(
            MUTANTS.iter().any(|&(_, f)| f == family),
            "no mutant breaks a rule of {family}"
        );
    }
}

#[tokio::test]
async fn a_scenario_the_agent_gives_nothing_to_judge_is_not_exercised() {
    let base = serve().await;
    let report = Check::new(format!("{base}/good"))
        .scenarios([Scenario::Capabilities, Scenario::Text])
        .run()
        .await
        .unwrap();
    assert_eq!(report.scenarios.len(), 2);
    assert_eq!(report.scenarios[0].name, "text");
    assert_eq!(report.scenarios[1].verdict, Verdict::NotExercised);
    assert_eq!(
        report.family(Family::Capabilities).unwrap().verdict,
        Verdict::NotExercised
    );
    assert!(report.passed());
}

#[tokio::test]
async fn an_absent_server_is_an_error_not_a_report() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/x", listener.local_addr().unwrap());
    drop(listener);
    let error = Check::new(url).run().await.unwrap_err();
    assert!(
        matches!(error, agwire_check::Error::Unreachable { .. }),
        "{error}"
    );
}
