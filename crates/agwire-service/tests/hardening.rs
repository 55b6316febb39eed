//! What a careless or hostile client can do to a connection, over raw TCP:
//! stall before or inside its headers, declare a huge body, send a short
//! one, idle on a kept-alive connection — each is cut off by a configured
//! timeout or limit and answered with JSON `{"detail"}` where an answer is
//! due. And the contract's edges: one content-type rule for both run
//! endpoints, strict run input, framework errors as JSON, percent-encoded
//! `Location`, `Last-Event-ID` that is not a number.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agwire_service::auth::Auth;
use agwire_service::{BuiltinAgent, Config};
use common::{body, post, start};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A service whose timeouts are short enough to watch.
async fn impatient() -> SocketAddr {
    let mut config = Config::default();
    config.http.header_read_timeout_seconds = PATIENCE.as_secs();
    config.http.request_timeout_seconds = PATIENCE.as_secs();
    start(&config, BuiltinAgent::default(), Auth::none())
        .await
        .addr
}

/// Reads until the server closes the connection; the bytes it sent. Fails
/// the test if the connection is still open after `bound` (the limits under
/// test are a second; without them it stays open forever).
async fn read_until_closed(tcp: &mut TcpStream, bound: Duration) -> Vec<u8> {
    read_until_closed_since(tcp, Instant::now(), bound).await.0
}

/// The same, and how long after `since` the connection closed.
async fn read_until_closed_since(
    tcp: &mut TcpStream,
    since: Instant,
    bound: Duration,
) -> (Vec<u8>, Duration) {
    let mut received = Vec::new();
    let started = Instant::now();
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            match tcp.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(bound, read).await.unwrap_or_else(|_| {
        panic!(
            "the connection was still open after {:?}",
            started.elapsed()
        )
    });
    (received, since.elapsed())
}

/// The timeouts of [`impatient`]: each connection below is cut at one, and
/// not before it.
const PATIENCE: Duration = Duration::from_secs(1);

/// Status and JSON body of a raw HTTP/1.1 response.
fn parse(response: &[u8]) -> (u16, Value) {
    let text = String::from_utf8_lossy(response);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a response: {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_stalled_and_idle_connections_are_closed() {
    let addr = impatient().await;
    let bound = Duration::from_secs(10);
    // The server's clocks start after this one: each connection must stay
    // open at least the timeout after it.
    let opened = Instant::now();
    // Connects and says nothing.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    // Sends half its headers.
    let mut partial = TcpStream::connect(addr).await.unwrap();
    partial
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-slow: ")
        .await
        .unwrap();
    // Completes a request, then idles on the kept-alive connection.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let ((a, after_a), (b, after_b), (c, after_c)) = tokio::join!(
        read_until_closed_since(&mut silent, opened, bound),
        read_until_closed_since(&mut partial, opened, bound),
        read_until_closed_since(&mut idle, opened, bound),
    );
    for (what, after) in [("silent", after_a), ("partial", after_b), ("idle", after_c)] {
        assert!(
            after >= PATIENCE,
            "{what}: closed after {after:?}, before its {PATIENCE:?} timeout"
        );
    }
    assert!(a.is_empty(), "{}", String::from_utf8_lossy(&a));
    // hyper answers a header timeout with a bare 408 or nothing; either
    // way the connection is gone.
    assert!(b.is_empty() || b.starts_with(b"HTTP/1.1 408"), "{b:?}");
    assert_eq!(parse(&c).0, 200, "the request itself was answered");
}

/// Opens a connection to `addr` and has one request answered on it, kept
/// alive: a connection the service holds.
async fn held(addr: SocketAddr) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut chunk))
            .await
            .expect("answered in time")
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(parse(&seen).0, 200, "{}", String::from_utf8_lossy(&seen));
    tcp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_at_most_its_share_of_the_connections() {
    let mut config = Config::default();
    config.http.max_connections_per_peer = 2;
    let addr = start(&config, BuiltinAgent::default(), Auth::none())
        .await
        .addr;
    let _held = [held(addr).await, held(addr).await];
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut third, Duration::from_secs(10)).await;
    assert_eq!(
        parse(&answer),
        (
            503,
            json!({"detail": "too many connections from this address"})
        ),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // 0: no share at all.
    config.http.max_connections_per_peer = 0;
    let addr = start(&config, BuiltinAgent::default(), Auth::none())
        .await
        .addr;
    let _held = [held(addr).await, held(addr).await, held(addr).await];
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_declared_body_is_refused_at_once_and_a_short_one_times_out() {
    let addr = impatient().await;
    // 1 TB declared, two bytes sent: 413 before anything else arrives.
    let mut huge = TcpStream::connect(addr).await.unwrap();
    huge.write_all(
        b"POST /api/v1/agent/runs HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000000000000\r\n\r\n{}",
    )
    .await
    .unwrap();
    let answer = read_until_closed(&mut huge, Duration::from_secs(10)).await;
    assert_eq!(
        parse(&answer),
        (
            413,
            json!({"detail": "RunAgentInput payload exceeds size limit"})
        )
    );
    // 100 bytes declared, 10 sent, then silence: 408 once the request's
    // time is up (and not before), and the connection closes.
    let opened = Instant::now();
    let mut short = TcpStream::connect(addr).await.unwrap();
    short
        .write_all(b"PATCH /api/v1/me/profile HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"settings\"")
        .await
        .unwrap();
    let (answer, after) =
        read_until_closed_since(&mut short, opened, Duration::from_secs(10)).await;
    assert!(
        after >= PATIENCE,
        "answered after {after:?}, before the {PATIENCE:?} request timeout"
    );
    let (status, detail) = parse(&answer);
    assert_eq!(status, 408, "{}", String::from_utf8_lossy(&answer));
    assert!(detail["detail"].is_string(), "{detail}");
}

/// A PNG of about `bytes` bytes (a valid signature, then padding).
fn png(bytes: usize) -> Vec<u8> {
    let mut image = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    image.resize(bytes, 0);
    image
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_uploads_take_the_whole_limit_and_larger_ones_get_a_413() {
    let server = common::start(
        &agwire_service::Config::default(),
        agwire_service::BuiltinAgent::default(),
        agwire_service::auth::Auth::none(),
    )
    .await;
    let addr = server.addr;
    let url = format!("http://{addr}/api/v1/agent/attachments");
    let form = |size: usize| {
        reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(png(size))
                .file_name("big.png")
                .mime_str("image/png")
                .unwrap(),
        )
    };
    let client = reqwest::Client::new();
    for size in [2 * 1024 * 1024 + 1, 10 * 1024 * 1024] {
        let response = client
            .post(&url)
            .multipart(form(size))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 201, "{size} bytes");
        let created: Value = response.json().await.unwrap();
        assert_eq!(created["size"], size, "{created}");
    }
    // Over the limit: the client writes its whole body (no Expect:
    // 100-continue) and still reads the 413 — not a broken pipe.
    let response = client
        .post(&url)
        .multipart(form(10 * 1024 * 1024 + 1))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"detail": "attachment exceeds size limit"})
    );
    let response = client
        .post(&url)
        .header("content-type", "image/png")
        .body(png(11 * 1024 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"detail": "attachment exceeds size limit"})
    );
    // In a bucket: the two images; the refused ones, streamed in
    // parts until they passed the limit, became no object.
    if server.bucket.is_some() {
        assert_eq!(server.objects().await.len(), 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_run_endpoints_refuse_the_same_things_the_same_way() {
    let addr = common::serve().await;
    let client = reqwest::Client::new();
    let thread = uuid::Uuid::new_v4().to_string();
    let seed = body(&thread, "r-1", "hi");
    let agui = json!({"threadId": thread, "runId": "r-2", "state": {}, "messages": [], "tools": [], "context": []});
    for (path, payload) in [("/api/v1/agent/runs", &seed), ("/api/v1/agui", &agui)] {
        let plain = client
            .post(format!("http://{addr}{path}"))
            .header("content-type", "text/plain")
            .body(payload.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(plain.status().as_u16(), 415, "{path}");
        assert_eq!(
            plain.json::<Value>().await.unwrap(),
            json!({"detail": "Content-Type must be application/json"})
        );
        let mut empty = payload.clone();
        empty["runId"] = json!("");
        let response = client
            .post(format!("http://{addr}{path}"))
            .json(&empty)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 422, "{path}");
        assert_eq!(
            response.json::<Value>().await.unwrap(),
            json!({"detail": "runId must not be empty"})
        );
    }
    let metrics = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("agwire_runs_accepted_total 0\n"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_endpoint_refuses_what_lenient_decoding_would_drop() {
    let addr = common::serve().await;
    let thread = uuid::Uuid::new_v4().to_string();
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut run = body(&thread, "strict", "hi");
        edit(&mut run);
        run
    };
    let cases = [
        (
            with(&|r| {
                r["messages"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"id": "x", "role": "robot", "content": "beep"}));
            }),
            "invalid RunAgentInput: messages[1].role: unknown role \"robot\"",
        ),
        (
            with(&|r| {
                r["tools"] = json!([{"name": "mine", "description": "d", "parameters": "x"}]);
            }),
            "invalid RunAgentInput: tools[0].parameters must be a JSON Schema object",
        ),
        (
            with(&|r| {
                r["tools"] = json!([{"name": "mine", "description": "d", "parameters": {"type": "nothing"}}]);
            }),
            "",
        ),
        (
            with(&|r| {
                r["messages"][0]["content"] = json!([{"type": 5}, {"type": "text", "text": "hi"}]);
            }),
            "invalid RunAgentInput: messages[0].content[0].type: unknown content part type 5",
        ),
    ];
    for (run, want) in cases {
        let response = post(addr, &run, None).await;
        assert_eq!(response.status().as_u16(), 422, "{run}");
        let detail: Value = response.json().await.unwrap();
        let detail = detail["detail"].as_str().unwrap();
        if want.is_empty() {
            assert!(
                detail.starts_with(
                    "invalid RunAgentInput: tools[0].parameters is not a valid JSON Schema"
                ),
                "{detail}"
            );
        } else {
            assert_eq!(detail, want);
        }
    }
    let metrics = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("agwire_runs_accepted_total 0\n"),
        "{metrics}"
    );
}

/// Sends raw bytes as one request; the status and JSON body of the answer.
async fn raw(addr: SocketAddr, request: &[u8]) -> (u16, Value, String) {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request).await.unwrap();
    let answer = read_until_closed(&mut tcp, Duration::from_secs(10)).await;
    let (status, body) = parse(&answer);
    let head = String::from_utf8_lossy(&answer)
        .split("\r\n\r\n")
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    (status, body, head)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framework_errors_are_json_too() {
    let addr = common::serve().await;
    let close = "connection: close\r\n";
    let big = "x".repeat(3 * 1024 * 1024);
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (
            format!("GET /nowhere HTTP/1.1\r\nhost: localhost\r\n{close}\r\n").into_bytes(),
            404,
        ),
        (
            format!("DELETE /api/v1/agent/runs HTTP/1.1\r\nhost: localhost\r\n{close}\r\n").into_bytes(),
            405,
        ),
        (
            [
                b"GET /api/v1/agent/runs/%FF%FE HTTP/1.1\r\nhost: localhost\r\n".as_slice(),
                close.as_bytes(),
                b"\r\n",
            ]
            .concat(),
            400,
        ),
        (
            format!(
                "PATCH /api/v1/me/profile HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{close}\r\n{big}",
                big.len()
            )
            .into_bytes(),
            413,
        ),
        (
            format!(
                "POST /api/v1/automation/jobs HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{close}\r\n{big}",
                big.len()
            )
            .into_bytes(),
            413,
        ),
        (
            format!(
                "GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-big: {}\r\n{close}\r\n",
                "y".repeat(40 * 1024)
            )
            .into_bytes(),
            431,
        ),
        (
            format!(
                "GET /healthz HTTP/1.1\r\nhost: localhost\r\n{}{close}\r\n",
                (0..150).map(|i| format!("x-h{i}: v\r\n")).collect::<String>()
            )
            .into_bytes(),
            431,
        ),
    ];
    for (request, want) in cases {
        let (status, body, head) = raw(addr, &request).await;
        assert_eq!(status, want, "{head}");
        assert!(
            head.contains("content-type: application/json"),
            "{want}: {head}"
        );
        assert!(
            body["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{want}: {body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_is_percent_encoded_and_a_bad_last_event_id_is_400() {
    let addr = common::serve().await;
    let thread = uuid::Uuid::new_v4().to_string();
    let run = "a b?c#d/é";
    let accepted = post(addr, &body(&thread, run, "hi"), None).await;
    assert_eq!(accepted.status().as_u16(), 202);
    let location = accepted.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, "/api/v1/agent/runs/a%20b%3Fc%23d%2F%C3%A9/events");
    let log = reqwest::Client::new()
        .get(format!("http://{addr}{location}"))
        .send()
        .await
        .unwrap();
    assert_eq!(log.status().as_u16(), 200);
    let events = common::sse_with_ids(&log.bytes().await.unwrap());
    assert_eq!(
        events.last().map(|(_, e)| e.type_name()),
        Some("RUN_FINISHED")
    );
    // Last-Event-ID holding bytes that are not text.
    let (status, body, _) = raw(
        addr,
        &[
            format!(
                "GET {location} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\nlast-event-id: "
            )
            .as_bytes(),
            b"\xff\xfe1",
            b"\r\n\r\n",
        ]
        .concat(),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"detail": "Last-Event-ID / after must be an event sequence number"})
        )
    );
}

/// A reader resuming a live run after the last number a sequence can have
/// (`Last-Event-ID` or `?after=` 2^64 − 1) gets nothing after it: its
/// stream ends with the run, whole — it does not break off when the run's
/// next event arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_live_run_after_the_last_possible_event_ends_with_the_run() {
    let agent = BuiltinAgent::with_token_delay(Duration::from_millis(10));
    let addr = start(&Config::default(), agent, Auth::none()).await.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    let accepted = post(addr, &body(&thread, "live", &"word ".repeat(200)), None).await;
    assert_eq!(accepted.status().as_u16(), 202);
    // Live: ~2 s of words still to come.
    common::wait_for_text(addr, "live").await;
    let last = u64::MAX.to_string();
    let follow = |header: bool| {
        let last = last.clone();
        async move {
            let events = format!("http://{addr}/api/v1/agent/runs/live/events");
            let client = reqwest::Client::new();
            let request = if header {
                client.get(events).header("last-event-id", last)
            } else {
                client.get(format!("{events}?after={last}"))
            };
            let response = request.send().await.unwrap();
            assert_eq!(response.status().as_u16(), 200);
            tokio::time::timeout(Duration::from_secs(30), response.bytes())
                .await
                .expect("the stream ends with the run")
                .expect("the stream ends whole")
        }
    };
    let (by_header, by_query) = tokio::join!(follow(true), follow(false));
    assert!(common::sse_with_ids(&by_header).is_empty());
    assert!(common::sse_with_ids(&by_query).is_empty());
    let run = common::status(addr, "live").await;
    assert_eq!(run["status"], "succeeded", "{run}");
}

/// The calendar's range at the ends of time: a `from` whose default `to`
/// (30 days on) would pass the last instant a date can hold ends there;
/// an RFC 3339 date-time past either end is a 422 naming its field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calendar_range_at_the_ends_of_time() {
    let addr = common::serve().await;
    let get = |query: &'static str| async move {
        let response = reqwest::get(format!("http://{addr}/api/v1/calendar/events?{query}"))
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json::<Value>().await.unwrap())
    };
    // 30 days after it is past the last instant: the range ends there.
    assert_eq!(
        get("from=9999-12-30T00:00:00Z").await,
        (200, json!({"events": []}))
    );
    assert_eq!(
        get("from=9999-12-30T00:00:00Z&to=9999-12-30T22:00:00Z").await,
        (200, json!({"events": []}))
    );
    let out_of_range = |field: &str| json!({"detail": format!("{field} must be between -009999-01-02T01:59:59Z and 9999-12-30T22:00:00Z")});
    for (query, field) in [
        ("from=9999-12-31T23:59:59Z", "from"),
        ("from=-009999-01-01T00:00:00Z", "from"),
        (
            "from=2026-01-01T00:00:00Z&to=9999-12-31T23:59:59-25:59",
            "to",
        ),
        ("from=2026-01-01T00:00:00Z&to=9999-12-30T22:00:01Z", "to"),
    ] {
        assert_eq!(get(query).await, (422, out_of_range(field)), "{query}");
    }
    // Not a date-time at all: as before.
    assert_eq!(
        get("from=%2B99999-01-01").await,
        (
            422,
            json!({"detail": "from must be an RFC 3339 date-time with an offset"})
        )
    );
}

/// CORS is off unless origins are configured; then exactly those origins
/// may call the API from a browser (preflight and the real request), with
/// the headers a streaming AG-UI client needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_allows_only_the_configured_origins() {
    let client = reqwest::Client::new();
    let preflight = |base: String, origin: &'static str| {
        client
            .request(reqwest::Method::OPTIONS, format!("{base}/api/v1/agui"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type,authorization",
            )
            .send()
    };
    let allowed = |response: &reqwest::Response| {
        response
            .headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_owned())
    };
    // Default: no origin is allowed.
    let closed = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let answer = preflight(format!("http://{}", closed.addr), "https://app.example.com")
        .await
        .unwrap();
    assert_eq!(allowed(&answer), None);

    let mut config = Config::default();
    config.http.cors_allowed_origins = vec!["https://app.example.com".into()];
    let open = start(&config, BuiltinAgent::default(), Auth::none()).await;
    let base = format!("http://{}", open.addr);
    let answer = preflight(base.clone(), "https://app.example.com")
        .await
        .unwrap();
    assert_eq!(allowed(&answer).as_deref(), Some("https://app.example.com"));
    let headers = answer.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        headers.contains("authorization") && headers.contains("last-event-id"),
        "{headers}"
    );
    let answer = preflight(base.clone(), "https://evil.example.com")
        .await
        .unwrap();
    assert_eq!(allowed(&answer), None);
    // The real request: allowed, and the browser may read its Location.
    let thread = uuid::Uuid::new_v4().to_string();
    let answer = client
        .post(format!("{base}/api/v1/agent/runs"))
        .header("origin", "https://app.example.com")
        .json(&body(&thread, "cors", "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202);
    assert_eq!(allowed(&answer).as_deref(), Some("https://app.example.com"));
    let exposed = answer.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(exposed.contains("location"), "{exposed}");
}

/// Every answer carries a request id (the client's own when it sent one),
/// the same one the request's log line names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_has_a_request_id() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let client = reqwest::Client::new();
    let base = format!("http://{}", server.addr);
    let answer = client.get(format!("{base}/healthz")).send().await.unwrap();
    let id = answer.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    // Errors too.
    let answer = client.get(format!("{base}/nope")).send().await.unwrap();
    assert_eq!(answer.status(), 404);
    assert!(answer.headers().contains_key("x-request-id"));
    let answer = client
        .get(format!("{base}/healthz"))
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.headers()["x-request-id"], "trace-me-42");
}
