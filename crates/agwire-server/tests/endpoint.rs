//! The endpoint over real HTTP on loopback: negotiation, headers, errors
//! before the stream, the terminal event for every way a run can end,
//! keep-alive, disconnect → cancellation, and backpressure.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns panic on failure by design

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agwire_codec::proto::FrameDecoder;
use agwire_codec::sse::SseEventDecoder;
use agwire_core::pipeline::Pipeline;
use agwire_core::{Event, Interrupt, RunAgentInput, RunFinishedOutcome};
use agwire_server::{Agent, AgentEndpoint, AgentError, DisconnectPolicy, Error, RunContext};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

async fn serve_agent(endpoint: AgentEndpoint) -> SocketAddr {
    serve(axum::Router::new().route_service("/agent", endpoint)).await
}

fn input(protocol_version: Option<&str>) -> Value {
    let mut v = json!({
        "threadId": "thread-1",
        "runId": "run-1",
        "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {}
    });
    if let Some(p) = protocol_version {
        v["protocolVersion"] = json!(p);
    }
    v
}

struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

async fn post(addr: SocketAddr, body: &Value, accept: Option<&str>) -> Reply {
    let client = reqwest::Client::new();
    let req = client
        .post(format!("http://{addr}/agent"))
        .header("content-type", "application/json")
        .body(body.to_string());
    // reqwest sends `Accept: */*` by default, which admits protobuf.
    let req = req.header("accept", accept.unwrap_or("text/event-stream"));
    let resp = req.send().await.unwrap();
    Reply {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.bytes().await.unwrap().to_vec(),
    }
}

fn sse_events(body: &[u8]) -> Vec<Event> {
    let mut decoder = SseEventDecoder::new();
    let mut out = Vec::new();
    decoder.push(body, &mut out).unwrap();
    decoder.finish(&mut out).unwrap();
    out
}

/// Folds events as the official client would, failing on any verification
/// error or warning.
fn fold(events: &[Event]) -> agwire_core::apply::Session {
    let input: RunAgentInput = serde_json::from_value(input(None)).unwrap();
    let mut pipeline = Pipeline::for_input(&input);
    for event in events {
        pipeline.push(event.clone()).unwrap();
    }
    assert_eq!(pipeline.take_warnings(), vec![]);
    pipeline.into_session()
}

fn types(events: &[Event]) -> Vec<&str> {
    events.iter().map(Event::type_name).collect()
}

struct Hello;
impl Agent for Hello {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        ctx.say_streamed(["Hel", "lo"]).await?;
        Ok(())
    }
}

#[tokio::test]
async fn sse_response_headers_and_a_valid_stream() {
    let addr = serve_agent(AgentEndpoint::new(Hello)).await;
    let reply = post(addr, &input(None), Some("text/event-stream")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "text/event-stream");
    assert_eq!(reply.headers["cache-control"], "no-store");
    assert_eq!(reply.headers["x-accel-buffering"], "no");
    let text = String::from_utf8(reply.body.clone()).unwrap();
    assert!(text.starts_with("data: {\"type\":\"RUN_STARTED\",\"threadId\":\"thread-1\",\"runId\":\"run-1\",\"protocolVersion\":\"1.0\"}\n\n"), "{text}");
    let events = sse_events(&reply.body);
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    let session = fold(&events);
    assert_eq!(session.messages.len(), 2);
}

#[tokio::test]
async fn announces_the_negotiated_version() {
    let addr = serve_agent(AgentEndpoint::new(Hello)).await;
    for (asked, announced) in [
        (None, "1.0"),
        (Some("1.0"), "1.0"),
        (Some("1.1"), "1.1"),
        (Some("1.7"), "1.1"),
    ] {
        let events = sse_events(&post(addr, &input(asked), None).await.body);
        let Event::RunStarted(started) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(
            started.protocol_version.as_deref(),
            Some(announced),
            "asked {asked:?}"
        );
    }
}

#[tokio::test]
async fn protobuf_when_accept_admits_it() {
    let addr = serve_agent(AgentEndpoint::new(Hello)).await;
    for accept in [
        "application/vnd.ag-ui.event+proto",
        "*/*",
        "text/event-stream, application/vnd.ag-ui.event+proto",
    ] {
        let reply = post(addr, &input(None), Some(accept)).await;
        assert_eq!(
            reply.headers["content-type"], "application/vnd.ag-ui.event+proto",
            "{accept}"
        );
        let mut decoder = FrameDecoder::new();
        let mut events = Vec::new();
        decoder.push(&reply.body, &mut events).unwrap();
        decoder.finish().unwrap();
        assert_eq!(types(&events).last(), Some(&"RUN_FINISHED"));
        fold(&events);
    }
    let reply = post(
        addr,
        &input(None),
        Some("application/vnd.ag-ui.event+proto;q=0, */*"),
    )
    .await;
    assert_eq!(reply.headers["content-type"], "text/event-stream");
    // The per-server curl option.
    let addr = serve_agent(
        AgentEndpoint::new(Hello)
            .negotiator(agwire_codec::negotiate::Negotiator::new().prefer_sse_for_wildcards(true)),
    )
    .await;
    let reply = post(addr, &input(None), Some("*/*")).await;
    assert_eq!(reply.headers["content-type"], "text/event-stream");
}

#[tokio::test]
async fn errors_before_the_stream_are_statuses_with_json() {
    let addr = serve_agent(AgentEndpoint::new(Hello).max_body_bytes(4096)).await;
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/agent");
    let cases = [
        (client.get(&url), 405, "method not allowed"),
        (
            client.post(&url).header("content-type", "text/plain").body(input(None).to_string()),
            415,
            "Content-Type",
        ),
        (
            client.post(&url).header("content-type", "application/json").body("x".repeat(5000)),
            413,
            "exceeds 4096 bytes",
        ),
        (client.post(&url).header("content-type", "application/json").body("{\"threadId\":"), 400, "invalid JSON"),
        (
            client.post(&url).header("content-type", "application/json").body(r#"{"runId":"r","messages":[]}"#),
            422,
            "RunAgentInput",
        ),
        (
            client
                .post(&url)
                .header("content-type", "application/json")
                .body(r#"{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":5}]}"#),
            422,
            "/messages/0/content",
        ),
    ];
    for (request, status, needle) in cases {
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status);
        assert_eq!(resp.headers()["content-type"], "application/json");
        let body: Value = resp.json().await.unwrap();
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(needle), "{status}: {detail}");
    }
    // A streamed (chunked) body over the limit is refused too.
    let chunks =
        futures_util::stream::iter((0..10).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1000])));
    let resp = client
        .post(&url)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    // snake_case input is accepted.
    let reply = post(
        addr,
        &json!({"thread_id": "thread-1", "run_id": "run-1", "messages": [], "tools": [], "context": []}),
        None,
    )
    .await;
    assert_eq!(reply.status, 200);
}

struct Fails;
impl Agent for Fails {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let id = ctx.start_text().await?;
        ctx.text(&id, "partial").await?;
        Err(AgentError::new("upstream model unavailable").with_code("model_error"))
    }
}

struct Panics;
impl Agent for Panics {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        ctx.say("about to fail").await?;
        panic!("boom");
    }
}

struct EmitsInvalid {
    seen: mpsc::UnboundedSender<Error>,
}
impl Agent for EmitsInvalid {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        ctx.say("fine").await?;
        // Content for a message that was never started.
        let refused = ctx.text("nope", "x").await.unwrap_err();
        self.seen.send(refused.clone()).unwrap();
        // Everything after is refused too.
        self.seen.send(ctx.say("more").await.unwrap_err()).unwrap();
        Err(refused.into())
    }
}

#[tokio::test]
async fn agent_errors_and_panics_become_run_error() {
    let addr = serve_agent(AgentEndpoint::new(Fails)).await;
    let events = sse_events(&post(addr, &input(None), None).await.body);
    let Some(Event::RunError(error)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(error.message, "upstream model unavailable");
    assert_eq!(error.code.as_deref(), Some("model_error"));
    fold(&events);

    let addr = serve_agent(AgentEndpoint::new(Panics)).await;
    let events = sse_events(&post(addr, &input(None), None).await.body);
    let Some(Event::RunError(error)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(error.code.as_deref(), Some("panic"));
    fold(&events);
}

#[tokio::test]
async fn an_invalid_event_never_leaves() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let addr = serve_agent(AgentEndpoint::new(EmitsInvalid { seen: tx })).await;
    let events = sse_events(&post(addr, &input(None), None).await.body);
    let first = rx.recv().await.unwrap();
    assert_eq!(
        first.to_string(),
        "invalid event: Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'nope'. Start a text message with 'TEXT_MESSAGE_START' first."
    );
    assert!(matches!(rx.recv().await.unwrap(), Error::Misuse(_)));
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_ERROR"
        ]
    );
    let Some(Event::RunError(error)) = events.last() else {
        unreachable!()
    };
    assert_eq!(error.code.as_deref(), Some("invalid_event"));
    fold(&events);
}

struct LeavesThingsOpen;
impl Agent for LeavesThingsOpen {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        ctx.start_step("work").await?;
        let r = ctx.start_reasoning().await?;
        ctx.reasoning(&r, "hmm").await?;
        let m = ctx.start_text().await?;
        ctx.text(&m, "Let me call a tool").await?;
        let call = ctx.start_tool_call("frontend_tool", Some(&m)).await?;
        ctx.tool_call_args(&call, "{\"a\":").await?;
        ctx.tool_call_args(&call, "1}").await?;
        ctx.set_result(json!({"ok": true}));
        ctx.add_usage(agwire_core::TokenUsage {
            model: Some("test-model".into()),
            input_tokens: Some(10),
            output_tokens: Some(5),
            ..Default::default()
        });
        Ok(())
    }
}

#[tokio::test]
async fn open_things_are_closed_and_frontend_calls_listed_as_pending() {
    let addr = serve_agent(AgentEndpoint::new(LeavesThingsOpen)).await;
    let events = sse_events(&post(addr, &input(Some("1.1")), None).await.body);
    assert_eq!(
        &types(&events)[events.len() - 6..],
        [
            "TOOL_CALL_END",
            "TEXT_MESSAGE_END",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    let Some(Event::RunFinished(done)) = events.last() else {
        unreachable!()
    };
    assert_eq!(
        done.outcome,
        Some(RunFinishedOutcome::Success {
            pending_tool_call_ids: Some(vec!["run-1-call-3".into()])
        })
    );
    assert_eq!(done.result, Some(json!({"ok": true})));
    assert_eq!(done.usage.as_ref().map(Vec::len), Some(1));
    let session = fold(&events);
    assert_eq!(
        session.pending_tool_call_ids,
        vec!["run-1-call-3".to_string()]
    );
}

struct Interrupts;
impl Agent for Interrupts {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        ctx.say("Approve?").await?;
        ctx.interrupt(Interrupt::new("i-1", "confirmation"));
        Ok(())
    }
}

#[tokio::test]
async fn interrupts_end_the_run_with_an_interrupt_outcome() {
    let addr = serve_agent(AgentEndpoint::new(Interrupts)).await;
    let events = sse_events(&post(addr, &input(None), None).await.body);
    let session = fold(&events);
    assert_eq!(session.pending_interrupts.len(), 1);
    assert_eq!(session.pending_interrupts[0].id, "i-1");
}

struct StateAgent;
impl Agent for StateAgent {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        ctx.state_snapshot(json!({"count": 0, "items": []})).await?;
        ctx.set_state(json!({"count": 1, "items": ["a"]})).await?;
        ctx.set_state(json!({"count": 1, "items": ["a"]})).await?; // no change, nothing sent
        let bad = ctx
            .state_delta(vec![agwire_core::PatchOperation::remove("/missing")])
            .await
            .unwrap_err();
        assert!(matches!(bad, Error::Misuse(_)), "{bad}");
        Ok(())
    }
}

#[tokio::test]
async fn state_deltas_are_computed_from_the_last_state() {
    let addr = serve_agent(AgentEndpoint::new(StateAgent)).await;
    let events = sse_events(&post(addr, &input(None), None).await.body);
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "STATE_DELTA",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(fold(&events).state, json!({"count": 1, "items": ["a"]}));
}

struct Slow;
impl Agent for Slow {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        tokio::time::sleep(Duration::from_millis(400)).await;
        ctx.say("done").await?;
        Ok(())
    }
}

#[tokio::test]
async fn idle_sse_streams_get_keep_alive_comments() {
    let addr =
        serve_agent(AgentEndpoint::new(Slow).keep_alive(Some(Duration::from_millis(50)))).await;
    let reply = post(addr, &input(None), Some("text/event-stream")).await;
    let text = String::from_utf8(reply.body.clone()).unwrap();
    assert!(text.contains(": keep-alive\n\n"), "{text}");
    fold(&sse_events(&reply.body));
    // Never inside protobuf.
    let reply = post(
        addr,
        &input(None),
        Some("application/vnd.ag-ui.event+proto"),
    )
    .await;
    let mut events = Vec::new();
    FrameDecoder::new().push(&reply.body, &mut events).unwrap();
    fold(&events);
}

/// Emits until its run is cancelled or told to stop, then reports how it ended.
struct Ticker {
    ended: mpsc::UnboundedSender<&'static str>,
    ticks: usize,
}
impl Agent for Ticker {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let id = ctx.start_text().await?;
        for _ in 0..self.ticks {
            tokio::select! {
                _ = ctx.cancelled() => {
                    self.ended.send("cancelled").unwrap();
                    return Ok(());
                }
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
            if let Err(e) = ctx.text(&id, "tick ").await {
                // The disconnect may land while this emit waits: the emit
                // then fails as cancelled, which is the same outcome.
                self.ended
                    .send(match e {
                        Error::Disconnected => "disconnected",
                        Error::Cancelled => "cancelled",
                        _ => "other",
                    })
                    .unwrap();
                return Err(e.into());
            }
        }
        self.ended.send("finished").unwrap();
        Ok(())
    }
}

async fn read_a_little_then_hang_up(addr: SocketAddr) {
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/agent"))
        .header("content-type", "application/json")
        .body(input(None).to_string())
        .send()
        .await
        .unwrap();
    let mut resp = resp;
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(!first.is_empty());
    drop(resp);
}

#[tokio::test]
async fn a_disconnect_cancels_the_run() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let addr = serve_agent(AgentEndpoint::new(Ticker {
        ended: tx,
        ticks: 100_000,
    }))
    .await;
    read_a_little_then_hang_up(addr).await;
    let how = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(how == "cancelled" || how == "disconnected", "{how}");
}

#[tokio::test]
async fn with_the_finish_policy_a_disconnected_run_completes() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let addr = serve_agent(
        AgentEndpoint::new(Ticker {
            ended: tx,
            ticks: 200,
        })
        .on_disconnect(DisconnectPolicy::Finish),
    )
    .await;
    read_a_little_then_hang_up(addr).await;
    let how = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(how, "finished");
}

/// Emits `total` events as fast as the client lets it, counting them.
struct Firehose {
    emitted: Arc<AtomicUsize>,
    total: usize,
}
impl Agent for Firehose {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let id = ctx.start_text().await?;
        let delta = "x".repeat(512);
        for _ in 0..self.total {
            ctx.text(&id, &delta).await?;
            self.emitted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_stalled_reader_applies_backpressure_and_loses_nothing() {
    const TOTAL: usize = 100_000;
    let emitted = Arc::new(AtomicUsize::new(0));
    let addr = serve_agent(
        AgentEndpoint::new(Firehose {
            emitted: emitted.clone(),
            total: TOTAL,
        })
        .channel_capacity(16),
    )
    .await;
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = input(None).to_string();
    let request = format!(
        "POST /agent HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0u8; 256];
    let n = socket.read(&mut head).await.unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));

    // Stop reading: the agent must stall once the socket buffers, hyper's
    // buffer and the channel are full, far short of the whole run.
    let mut last = usize::MAX;
    let mut stable = 0;
    while stable < 10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = emitted.load(Ordering::Relaxed);
        if now == last {
            stable += 1;
        } else {
            stable = 0;
        }
        last = now;
    }
    eprintln!("stalled reader: the agent stopped after {last} of {TOTAL} events (512 B each)");
    assert!(
        last < TOTAL / 4,
        "the agent ran ahead of a stalled reader: {last} of {TOTAL} events"
    );

    // Resume reading: every event arrives.
    let mut rest = Vec::new();
    socket.read_to_end(&mut rest).await.unwrap();
    let text = String::from_utf8_lossy(&rest);
    let contents = text.matches("\"type\":\"TEXT_MESSAGE_CONTENT\"").count()
        + String::from_utf8_lossy(&head[..n])
            .matches("\"type\":\"TEXT_MESSAGE_CONTENT\"")
            .count();
    assert_eq!(contents, TOTAL);
    assert!(text.contains("\"type\":\"RUN_FINISHED\""));
    assert_eq!(emitted.load(Ordering::Relaxed), TOTAL);
}
