//! The client over real HTTP on loopback: both formats, awkward chunking,
//! errors, verification, abort, truncation and exactly-once reconnect.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agwire_client::core::{Event, RunAgentInput};
use agwire_client::{Accept, Client, Error, Hook, NoHooks, Reconnect, Subscriber};
use agwire_codec::sse::SseEncoder;
use agwire_server::{Agent, AgentEndpoint, AgentError, RunContext};
use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode};
use axum::routing::post;
use serde_json::json;
use tokio::sync::mpsc;

async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

fn input() -> RunAgentInput {
    let mut input = RunAgentInput::new("thread-1", "run-1");
    input.messages =
        vec![serde_json::from_value(json!({"id": "u1", "role": "user", "content": "hi"})).unwrap()];
    input
}

struct Weather;
impl Agent for Weather {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        ctx.start_step("lookup").await?;
        let call = ctx
            .tool_call("get_weather", &json!({"city": "Lisbon"}))
            .await?;
        ctx.tool_result(&call, "21 °C").await?;
        ctx.finish_step("lookup").await?;
        ctx.say_streamed(["It is ", "21 °C."]).await?;
        ctx.state_snapshot(json!({"city": "Lisbon"})).await?;
        ctx.set_result(json!({"ok": true}));
        Ok(())
    }
}

#[derive(Default)]
struct Recorder {
    calls: Vec<String>,
}

impl Subscriber for Recorder {
    fn on_run_started(&mut self, _: &agwire_client::core::RunStartedEvent, _: Hook<'_>) {
        self.calls.push("run_started".into());
    }
    fn on_step_started(&mut self, e: &agwire_client::core::StepStartedEvent, _: Hook<'_>) {
        self.calls.push(format!("step_started {}", e.step_name));
    }
    fn on_tool_call_end(&mut self, name: &str, args: &str, _: Hook<'_>) {
        self.calls.push(format!("tool_call_end {name} {args}"));
    }
    fn on_text_message_content(&mut self, _: &str, buffer: &str, _: Hook<'_>) {
        self.calls.push(format!("text {buffer}"));
    }
    fn on_text_message_end(&mut self, buffer: &str, _: Hook<'_>) {
        self.calls.push(format!("text_end {buffer}"));
    }
    fn on_new_tool_call(
        &mut self,
        call: &agwire_client::core::ToolCall,
        _: &agwire_client::core::apply::Session,
    ) {
        self.calls
            .push(format!("new_tool_call {}", call.function.name));
    }
    fn on_state_changed(&mut self, s: &agwire_client::core::apply::Session) {
        self.calls.push(format!("state {}", s.state));
    }
    fn on_run_finished(&mut self, _: &agwire_client::core::RunFinishedEvent, hook: Hook<'_>) {
        self.calls
            .push(format!("run_finished {}", hook.session.messages.len()));
    }
    fn on_run_finalized(&mut self) {
        self.calls.push("finalized".into());
    }
}

#[tokio::test]
async fn runs_to_completion_over_sse_and_protobuf_with_hooks() {
    let addr =
        serve(axum::Router::new().route_service("/agent", AgentEndpoint::new(Weather))).await;
    let mut sessions = Vec::new();
    for accept in [Accept::Sse, Accept::Proto, Accept::Both] {
        let client = Client::builder(format!("http://{addr}/agent"))
            .accept(accept)
            .build()
            .unwrap();
        let mut recorder = Recorder::default();
        let summary = client
            .run_to_completion(&input(), &mut recorder)
            .await
            .unwrap();
        assert_eq!(
            recorder.calls,
            [
                "run_started",
                "step_started lookup",
                "new_tool_call get_weather",
                r#"tool_call_end get_weather {"city":"Lisbon"}"#,
                "text It is ",
                "text It is 21 °C.",
                "text_end It is 21 °C.",
                r#"state {"city":"Lisbon"}"#,
                "run_finished 4",
                "finalized"
            ]
        );
        assert_eq!(summary.result(), Some(&json!({"ok": true})));
        let streamed: Vec<_> = futures_util::StreamExt::collect::<Vec<_>>(
            client.run(&input()).await.unwrap().into_stream(),
        )
        .await;
        assert_eq!(streamed.len(), 13);
        assert!(streamed.iter().all(Result::is_ok));
        assert_eq!(summary.new_messages.len(), 3);
        assert!(summary.error().is_none());
        sessions.push(summary.session);
    }
    assert_eq!(sessions[0], sessions[1]);
    assert_eq!(sessions[1], sessions[2]);
}

/// Serves `body` in `piece`-byte chunks with `content_type`.
fn chunked(body: &[u8], piece: usize, content_type: &'static str) -> Response<Body> {
    let chunks: Vec<Result<Vec<u8>, Infallible>> =
        body.chunks(piece).map(|c| Ok(c.to_vec())).collect();
    Response::builder()
        .header("content-type", content_type)
        .body(Body::from_stream(futures_util::stream::iter(chunks)))
        .unwrap()
}

fn sse(events: &[serde_json::Value]) -> Vec<u8> {
    events
        .iter()
        .flat_map(|e| format!("data: {e}\n\n").into_bytes())
        .collect()
}

#[tokio::test]
async fn decodes_any_chunking_and_charset_suffixed_sse() {
    let body = sse(&[
        json!({"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "héllo wörld"}),
        json!({"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"}),
    ]);
    for piece in [1, 2, 3, 7, 1000] {
        let body = body.clone();
        let app = axum::Router::new().route(
            "/agent",
            post(move || async move { chunked(&body, piece, "text/event-stream; charset=utf-8") }),
        );
        let addr = serve(app).await;
        let client = Client::new(format!("http://{addr}/agent")).unwrap();
        let summary = client
            .run_to_completion(&input(), &mut NoHooks)
            .await
            .unwrap();
        let last = summary.messages().last().unwrap();
        assert_eq!(last.id(), "m1", "piece {piece}");
        assert_eq!(
            serde_json::to_value(last).unwrap()["content"],
            "héllo wörld"
        );
    }
}

#[tokio::test]
async fn non_2xx_is_an_error_with_status_and_body() {
    let app = axum::Router::new().route(
        "/agent",
        post(|| async {
            Response::builder()
                .status(StatusCode::UNPROCESSABLE_ENTITY)
                .header("content-type", "application/json")
                .body(Body::from(r#"{"detail":"threadId must be a valid UUID"}"#))
                .unwrap()
        }),
    );
    let addr = serve(app).await;
    let client = Client::new(format!("http://{addr}/agent")).unwrap();
    match client.run(&input()).await.unwrap_err() {
        Error::Status { status, json, body } => {
            assert_eq!(status, 422);
            assert_eq!(json.unwrap()["detail"], "threadId must be a valid UUID");
            assert!(body.contains("UUID"));
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn invalid_streams_fail_with_the_official_message_and_truncation_is_no_success() {
    let bad = sse(&[
        json!({"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "x"}),
    ]);
    let cut = sse(&[
        json!({"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
    ]);
    let app = axum::Router::new()
        .route(
            "/bad",
            post(move || async move { chunked(&bad, 5, "text/event-stream") }),
        )
        .route(
            "/cut",
            post(move || async move { chunked(&cut, 5, "text/event-stream") }),
        );
    let addr = serve(app).await;
    let client = Client::new(format!("http://{addr}/bad")).unwrap();
    let error = client
        .run_to_completion(&input(), &mut NoHooks)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'm1'. Start a text message with 'TEXT_MESSAGE_START' first."
    );
    let client = Client::new(format!("http://{addr}/cut")).unwrap();
    let error = client
        .run_to_completion(&input(), &mut NoHooks)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Truncated), "{error}");
}

/// Streams until cancelled; reports how it ended.
struct Endless {
    ended: mpsc::UnboundedSender<&'static str>,
}
impl Agent for Endless {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let id = ctx.start_text().await?;
        loop {
            tokio::select! {
                () = ctx.cancelled() => {
                    self.ended.send("cancelled").unwrap();
                    return Ok(());
                }
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
            if ctx.text(&id, "tick ").await.is_err() {
                self.ended.send("disconnected").unwrap();
                return Ok(());
            }
        }
    }
}

#[tokio::test]
async fn abort_ends_the_run_with_run_error_abort_and_the_server_sees_it() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let addr = serve(
        axum::Router::new().route_service("/agent", AgentEndpoint::new(Endless { ended: tx })),
    )
    .await;
    let client = Client::new(format!("http://{addr}/agent")).unwrap();
    let mut run = client.run(&input()).await.unwrap();
    let abort = run.abort_handle();
    let mut seen = Vec::new();
    while let Some(event) = run.next().await {
        let event = event.unwrap();
        seen.push(event.type_name().to_owned());
        if seen.len() == 5 {
            abort.abort();
        }
    }
    let Some(last) = seen.last() else {
        unreachable!()
    };
    assert_eq!(last, "RUN_ERROR");
    let Some(agwire_client::core::apply::RunEnd::Errored { code, message, .. }) =
        &run.session().last_run
    else {
        panic!("{:?}", run.session().last_run)
    };
    assert_eq!(
        (code.as_deref(), message.as_str()),
        (Some("abort"), "Request aborted")
    );
    let how = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(how == "cancelled" || how == "disconnected");
}

/// A resumable event log: `Last-Event-ID` picks up after the given id; the
/// first `drops` responses cut the connection after `per_attempt` new events,
/// and each resumed response repeats two events the client already has.
#[derive(Clone)]
struct Log {
    events: Arc<Vec<serde_json::Value>>,
    attempts: Arc<Mutex<Vec<Option<String>>>>,
    drops: usize,
    per_attempt: usize,
}

async fn serve_log(log: Log, headers: HeaderMap) -> Response<Body> {
    let last: Option<String> = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let attempt = {
        let mut a = log.attempts.lock().unwrap();
        a.push(last.clone());
        a.len()
    };
    let after: usize = last.as_deref().map_or(0, |l| l.parse().unwrap());
    let start = after.saturating_sub(2); // repeat two seen events
    let cut = attempt <= log.drops;
    let end = if cut {
        (after + log.per_attempt).min(log.events.len())
    } else {
        log.events.len()
    };
    let encoder = SseEncoder::new();
    let mut chunks: Vec<Result<Vec<u8>, std::io::Error>> = Vec::new();
    for (i, value) in log.events.iter().enumerate().take(end).skip(start) {
        let event = Event::from_value(value.clone()).unwrap().value;
        let mut buf = Vec::new();
        encoder.encode_with_id(i as u64 + 1, &event, &mut buf);
        chunks.push(Ok(buf));
    }
    let body = futures_util::stream::iter(chunks);
    // The drop comes after the events were flushed, as a real network drop.
    let drop = futures_util::stream::once(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Err(std::io::Error::other("connection dropped"))
    });
    let body: Body = if cut {
        Body::from_stream(futures_util::StreamExt::chain(body, drop))
    } else {
        Body::from_stream(body)
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

fn long_log(n: usize) -> Vec<serde_json::Value> {
    let mut events = vec![
        json!({"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
    ];
    events.extend((0..n).map(
        |i| json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": format!("{i} ")}),
    ));
    events.push(json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}));
    events.push(json!({"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"}));
    events
}

#[tokio::test]
async fn reconnects_with_last_event_id_and_delivers_each_event_once() {
    let events = Arc::new(long_log(40));
    let log = Log {
        events: events.clone(),
        attempts: Arc::default(),
        drops: 4,
        per_attempt: 7,
    };
    let attempts = log.attempts.clone();
    let app = axum::Router::new().route(
        "/agent",
        post(move |headers: HeaderMap| serve_log(log.clone(), headers)),
    );
    let addr = serve(app).await;
    let fast = Reconnect {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
    };
    let client = Client::builder(format!("http://{addr}/agent"))
        .reconnect(fast)
        .build()
        .unwrap();
    let mut run = client.run(&input()).await.unwrap();
    let mut got = Vec::new();
    while let Some(event) = run.next().await {
        got.push(serde_json::to_value(event.unwrap()).unwrap());
    }
    assert_eq!(got, *events, "every event exactly once, in order");
    assert_eq!(
        *attempts.lock().unwrap(),
        [
            None,
            Some("7".into()),
            Some("14".into()),
            Some("21".into()),
            Some("28".into())
        ]
    );
    // The same fold as reading the log in one piece.
    let mut single = agwire_client::core::pipeline::Pipeline::for_input(&input());
    for e in events.iter() {
        single.push_value(e.clone()).unwrap();
    }
    assert_eq!(run.session(), single.session());
}

#[tokio::test]
async fn gives_up_after_max_attempts_without_progress() {
    let log = Log {
        events: Arc::new(long_log(10)),
        attempts: Arc::default(),
        drops: usize::MAX,
        per_attempt: 0,
    };
    let first = Log {
        per_attempt: 3,
        ..log.clone()
    };
    let attempts = log.attempts.clone();
    let app = axum::Router::new().route(
        "/agent",
        post(move |headers: HeaderMap| {
            // The first response makes progress (so there is an id), then none do.
            let which = if first.attempts.lock().unwrap().is_empty() {
                first.clone()
            } else {
                log.clone()
            };
            serve_log(which, headers)
        }),
    );
    let addr = serve(app).await;
    let fast = Reconnect {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(4),
    };
    let client = Client::builder(format!("http://{addr}/agent"))
        .reconnect(fast)
        .build()
        .unwrap();
    let error = client
        .run_to_completion(&input(), &mut NoHooks)
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::ReconnectFailed { attempts: 3, .. }),
        "{error}"
    );
    assert_eq!(attempts.lock().unwrap().len(), 4);
}
