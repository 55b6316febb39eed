//! `EventStream` (a body fed by `(seq, event)` pairs), `Intake` in a handler of
//! one's own, and `serve`, over real HTTP on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use agwire_codec::negotiate::WireFormat;
use agwire_codec::proto::FrameDecoder;
use agwire_codec::sse::{SseDecoder, SseEventDecoder};
use agwire_core::{Event, StepStartedEvent};
use agwire_server::{EventStream, Intake, IntakeError, serve};
use axum::extract::{ConnectInfo, Request};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

fn step(name: &str) -> Event {
    Event::StepStarted(StepStartedEvent::new(name))
}

/// Serves `app` with `agwire_server::serve`; the sender stops it.
async fn start(
    app: axum::Router,
) -> (SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        serve(listener, app, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (addr, stop, server)
}

/// A handler as a service would write one: the negotiated intake, its own
/// validation, then events from a channel fed elsewhere.
async fn events(request: Request) -> Response {
    let intake = Intake::new().max_body_bytes(200);
    let (value, format) = match intake.json(request).await {
        Ok(accepted) => accepted,
        Err(IntakeError::PayloadTooLarge { .. }) => {
            return (
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                [("content-type", "application/json")],
                json!({"detail": "payload exceeds size limit"}).to_string(),
            )
                .into_response();
        }
        Err(error) => return error.into_response(),
    };
    let count = value["count"].as_u64().unwrap_or(0);
    let unknown = value["unknown"].as_bool().unwrap_or(false);
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        for seq in 1..=count {
            tx.send((seq * 10, step(&format!("s{seq}")))).await.unwrap();
        }
        if unknown {
            let future = Event::from_json(r#"{"type":"FUTURE_EVENT","x":1}"#)
                .unwrap()
                .value;
            tx.send((99, future)).await.unwrap();
            // Never sent: the stream ends at the event it cannot encode.
            let _ = tx.send((100, step("after"))).await;
        }
    });
    EventStream::from_receiver(rx, format).into_response()
}

/// A stream that stays open, with a short keep-alive period.
async fn idle(request: Request) -> Response {
    let (_, format) = Intake::new().json(request).await.unwrap();
    let source =
        futures_util::stream::iter([(1, step("first"))]).chain(futures_util::stream::pending());
    EventStream::with_keep_alive(source, format, Some(Duration::from_millis(50))).into_response()
}

async fn peer(ConnectInfo(peer): ConnectInfo<SocketAddr>) -> String {
    peer.ip().to_string()
}

use futures_util::StreamExt as _;

fn app() -> axum::Router {
    axum::Router::new()
        .route("/events", axum::routing::post(events))
        .route("/idle", axum::routing::post(idle))
        .route("/peer", axum::routing::get(peer))
}

#[tokio::test]
async fn sse_frames_carry_the_sequence_numbers() {
    let (addr, _stop, _server) = start(app()).await;
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/events"))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(json!({"count": 3}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert_eq!(resp.headers()["x-accel-buffering"], "no");
    let body = resp.bytes().await.unwrap();
    let mut frames = Vec::new();
    let mut decoder = SseDecoder::new();
    decoder.push(&body, &mut frames).unwrap();
    decoder.finish(&mut frames).unwrap();
    let ids: Vec<_> = frames.iter().map(|f| f.id.clone()).collect();
    assert_eq!(
        ids,
        [Some("10".into()), Some("20".into()), Some("30".into())]
    );
    let mut events = Vec::new();
    let mut decoder = SseEventDecoder::new();
    decoder.push(&body, &mut events).unwrap();
    decoder.finish(&mut events).unwrap();
    assert_eq!(events, [step("s1"), step("s2"), step("s3")]);
}

#[tokio::test]
async fn protobuf_ends_at_an_event_it_cannot_encode() {
    let (addr, _stop, _server) = start(app()).await;
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/events"))
        .header("content-type", "application/json")
        .header("accept", "application/vnd.ag-ui.event+proto")
        .body(json!({"count": 2, "unknown": true}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.ag-ui.event+proto"
    );
    let body = resp.bytes().await.unwrap();
    let mut events = Vec::new();
    let mut decoder = FrameDecoder::new();
    decoder.push(&body, &mut events).unwrap();
    decoder.finish().unwrap();
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(&events[..2], [step("s1"), step("s2")]);
    match &events[2] {
        Event::RunError(e) => assert_eq!(e.code.as_deref(), Some("encoding_error")),
        other => panic!("expected RUN_ERROR, got {other:?}"),
    }
}

#[tokio::test]
async fn refusals_keep_the_handlers_own_messages() {
    let (addr, _stop, _server) = start(app()).await;
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/events");
    let too_big = client
        .post(&url)
        .header("content-type", "application/json")
        .body(json!({"pad": "x".repeat(300)}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(too_big.status(), 413);
    let detail: serde_json::Value = too_big.json().await.unwrap();
    assert_eq!(detail["detail"], "payload exceeds size limit");
    let text = client
        .post(&url)
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), 415);
    let detail: serde_json::Value = text.json().await.unwrap();
    assert_eq!(detail["detail"], IntakeError::UnsupportedMediaType.detail());
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_refused_before_the_body() {
    let (addr, _stop, _server) = start(app()).await;
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    // Declares a terabyte and sends two bytes: the answer must not wait for the rest.
    socket
        .write_all(b"POST /events HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000000000000\r\n\r\n{}")
        .await
        .unwrap();
    let mut head = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut head))
        .await
        .expect("answered before the body")
        .unwrap();
    let head = String::from_utf8_lossy(&head[..n]);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
}

#[tokio::test]
async fn an_idle_stream_gets_keep_alive_comments_and_the_server_drains() {
    let (addr, stop, server) = start(app()).await;
    let mut resp = reqwest::Client::new()
        .post(format!("http://{addr}/idle"))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body("{}")
        .send()
        .await
        .unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(": keep-alive\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), resp.chunk())
            .await
            .expect("a keep-alive within 10 s")
            .unwrap()
            .expect("stream open");
        seen.extend_from_slice(&chunk);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("id: 1\ndata: "));
    // Shutdown waits for open connections; dropping the client ends this one.
    stop.send(()).unwrap();
    drop(resp);
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("serve returns once its connections are done")
        .unwrap();
}

#[tokio::test]
async fn handlers_see_the_peer_address() {
    let (addr, _stop, _server) = start(app()).await;
    let text = reqwest::get(format!("http://{addr}/peer"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(text, "127.0.0.1");
}

#[test]
fn the_format_follows_accept() {
    let intake = Intake::new();
    let mut headers = axum::http::HeaderMap::new();
    assert_eq!(intake.format(&headers), WireFormat::Sse);
    headers.insert(
        "accept",
        "application/vnd.ag-ui.event+proto".parse().unwrap(),
    );
    assert_eq!(intake.format(&headers), WireFormat::Protobuf);
}
