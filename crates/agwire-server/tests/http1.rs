//! `serve`'s HTTP/1.1 connections over real TCP, spoken byte by byte: the
//! request framings a client may use, and what a connection must do at its
//! edges (pipelining, `Expect: 100-continue`, HTTP/1.0, limits, a client
//! that leaves mid-stream, a client that says nothing).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agwire_codec::negotiate::WireFormat;
use agwire_server::core::{Event, StepStartedEvent};
use agwire_server::{EventStream, ServeConfig};
use agwire_testkit::raw_http::{DropFlag, comes_true, read_to_end, read_until};
use axum::body::Bytes;
use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(config: ServeConfig) -> (SocketAddr, Arc<AtomicBool>) {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let app = axum::Router::new()
        .route(
            "/len",
            post(|body: Bytes| async move { body.len().to_string() }),
        )
        .route(
            "/reject",
            post(|| async { (axum::http::StatusCode::FORBIDDEN, "no") }),
        )
        .route("/hello", get(|| async { "hello" }))
        .route(
            "/flood",
            get({
                let flag = flag.clone();
                move || {
                    let guard = DropFlag(flag.clone());
                    async move {
                        let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
                        let endless = futures_util::stream::repeat_with(move || {
                            let _ = &guard;
                            Ok::<_, std::io::Error>(chunk.clone())
                        });
                        axum::body::Body::from_stream(endless)
                    }
                }
            }),
        )
        .route(
            "/stream",
            get(move || {
                let guard = DropFlag(flag.clone());
                async move {
                    let step = Event::StepStarted(StepStartedEvent::new("s"));
                    let events = futures_util::StreamExt::chain(
                        futures_util::stream::iter([(1, step)]),
                        futures_util::stream::poll_fn(move |_| {
                            let _ = &guard;
                            std::task::Poll::Pending
                        }),
                    );
                    EventStream::new(events, WireFormat::Sse).into_response()
                }
            }),
        );
    (serve(app, config).await, dropped)
}

async fn serve(app: axum::Router, config: ServeConfig) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(agwire_server::serve_with(
        listener,
        app,
        config,
        std::future::pending(),
    ));
    addr
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let (addr, _) = start(ServeConfig::default()).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(
            b"POST /len HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\n\r\nabcGET /hello HTTP/1.1\r\nhost: a\r\n\r\nPOST /len HTTP/1.1\r\nhost: a\r\nconnection: close\r\ncontent-length: 5\r\n\r\n12345",
        )
        .await
        .unwrap();
    let text = read_to_end(&mut socket).await;
    let bodies: Vec<&str> = text
        .split("HTTP/1.1 200 OK\r\n")
        .skip(1)
        .map(|r| r.split("\r\n\r\n").nth(1).unwrap_or(""))
        .collect();
    assert_eq!(bodies, ["3", "hello", "5"], "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
}

#[tokio::test]
async fn a_chunked_body_reaches_the_handler_whole() {
    // The handler tells each piece of the body as it reads it: the rest is
    // written only once the server has read the first write, and that
    // first piece ends mid-chunk ("wi" of "wiki") — a body that arrived
    // whole would have come as the whole chunk.
    let (pieces, mut read) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let app = axum::Router::new()
        .route(
            "/pieces",
            post(move |body: axum::body::Body| {
                let pieces = pieces.clone();
                async move {
                    let mut body = body.into_data_stream();
                    let mut len = 0;
                    while let Some(piece) = futures_util::StreamExt::next(&mut body).await {
                        let piece = piece.unwrap();
                        len += piece.len();
                        let _ = pieces.send(piece);
                    }
                    len.to_string()
                }
            }),
        )
        .route("/hello", get(|| async { "hello" }));
    let addr = serve(app, ServeConfig::default()).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"POST /pieces HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n4\r\nwi")
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), read.recv())
        .await
        .expect("the handler read nothing of the first write within 10 s")
        .unwrap();
    assert_eq!(
        first,
        Bytes::from_static(b"wi"),
        "the first write did not reach the handler alone: the body was not split"
    );
    socket
        .write_all(b"ki\r\n6;ext=1\r\npedia \r\n0\r\ntrailer: x\r\n\r\nGET /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let text = read_to_end(&mut socket).await;
    assert!(text.contains("\r\n\r\n10"), "{text}");
    assert!(text.ends_with("hello"), "the connection carried on: {text}");
    let mut whole = first.to_vec();
    while let Ok(piece) = read.try_recv() {
        whole.extend_from_slice(&piece);
    }
    assert_eq!(whole, b"wikipedia ");
}

#[tokio::test]
async fn expect_continue_is_answered_only_when_the_body_is_read() {
    let (addr, _) = start(ServeConfig::default()).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(
            b"POST /len HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 4\r\n\r\n",
        )
        .await
        .unwrap();
    let first = read_until(&mut socket, "\r\n\r\n").await;
    assert_eq!(first, "HTTP/1.1 100 Continue\r\n\r\n");
    socket.write_all(b"abcd").await.unwrap();
    let answer = read_until(&mut socket, "\r\n\r\n4").await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");

    // A handler that answers without reading: no 100, the answer, and the
    // connection closes (the body was never sent).
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"POST /reject HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 4\r\n\r\n")
        .await
        .unwrap();
    let text = read_to_end(&mut socket).await;
    assert!(text.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{text}");
    assert!(!text.contains("100 Continue"), "{text}");
}

#[tokio::test]
async fn an_http_1_0_client_gets_its_answer_and_the_close() {
    let (addr, _) = start(ServeConfig::default()).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"GET /hello HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    let text = read_to_end(&mut socket).await;
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("content-length: 5\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nhello"), "{text}");
}

#[tokio::test]
async fn bad_heads_get_json_and_the_close() {
    let (addr, _) = start(ServeConfig::default().max_head_bytes(2048).max_headers(8)).await;
    let cases: [(String, &str); 4] = [
        (
            "POST /len HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\nabc"
                .into(),
            "400 Bad Request",
        ),
        (
            format!("GET /hello HTTP/1.1\r\nhost: a\r\nx: {}\r\n\r\n", "a".repeat(4096)),
            "431 Request Header Fields Too Large",
        ),
        (
            format!("GET /hello HTTP/1.1\r\nhost: a\r\n{}\r\n", "a: b\r\n".repeat(9)),
            "431 Request Header Fields Too Large",
        ),
        ("GET /hello HTTP/9\r\n\r\n".into(), "400 Bad Request"),
    ];
    for (request, status) in cases {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket.write_all(request.as_bytes()).await.unwrap();
        let text = read_to_end(&mut socket).await;
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status}\r\n")),
            "{text}"
        );
        assert!(text.contains("content-type: application/json"), "{text}");
        assert!(text.contains(r#"{"detail":"#), "{text}");
    }
}

#[tokio::test]
async fn a_client_that_leaves_mid_stream_drops_the_body_at_once() {
    let (addr, dropped) = start(ServeConfig::default()).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"GET /stream HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    let text = read_until(&mut socket, "STEP_STARTED").await;
    assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
    assert!(!dropped.load(Ordering::SeqCst), "the stream is open");
    drop(socket);
    assert!(
        comes_true(&dropped).await,
        "the response body outlived its client"
    );
}

#[tokio::test]
async fn a_client_that_stops_reading_is_reset_at_the_write_deadline() {
    let (addr, dropped) =
        start(ServeConfig::default().write_timeout(Some(Duration::from_millis(300)))).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut socket = socket.connect(addr).await.unwrap();
    socket
        .write_all(b"GET /flood HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    let head = read_until(&mut socket, "\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    // Reads nothing more: the server's writes stall once both buffers fill.
    assert!(
        comes_true(&dropped).await,
        "the response outlived its write deadline"
    );
    // The connection was reset (RST), not closed in order (FIN): once what
    // the kernel had received is read, the next read fails with
    // ECONNRESET rather than ending.
    let mut seen = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buf))
            .await
            .expect("closed in time")
        {
            Ok(0) => break None,
            Ok(n) => seen += n,
            Err(error) => break Some(error.kind()),
        }
    };
    assert_eq!(
        end,
        Some(std::io::ErrorKind::ConnectionReset),
        "the connection ended without a reset after {seen} more bytes"
    );

    // The deadline is for each write, not the response: a client that
    // keeps taking bytes, however slowly, keeps its stream past it. (A
    // deadline of 2 s against a read every 20 ms: the server and this
    // reader share one thread, and a test process held off the CPU for a
    // whole deadline by the tests beside it — 1 s was seen once — finds the
    // write stalled before the reader gets to run.)
    let (addr, dropped) =
        start(ServeConfig::default().write_timeout(Some(Duration::from_secs(2)))).await;
    let mut reader = TcpStream::connect(addr).await.unwrap();
    reader
        .write_all(b"GET /flood HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(reader.read(&mut buf).await.unwrap() > 0);
    }
    assert!(
        !dropped.load(Ordering::SeqCst),
        "a slow reader is not reset"
    );
}

#[tokio::test]
async fn a_client_that_says_nothing_is_closed_at_the_head_deadline() {
    let deadline = Duration::from_millis(200);
    let (addr, _) = start(ServeConfig::default().header_read_timeout(Some(deadline))).await;
    // Each is closed at the deadline, not before it: the server's clock
    // starts after the client's, so the lower bound holds however slow the
    // machine is.
    let opened = tokio::time::Instant::now();
    let closed = |mut socket: TcpStream| async move {
        let text = read_to_end(&mut socket).await;
        (text, opened.elapsed())
    };
    let silent = TcpStream::connect(addr).await.unwrap();
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"GET /hello HTTP/1.1\r\nho").await.unwrap();
    let (silent, half) = tokio::join!(closed(silent), closed(half));
    for (what, (text, after)) in [("silent", silent), ("half a head", half)] {
        assert_eq!(text, "", "{what}");
        assert!(
            after >= deadline,
            "{what}: closed after {after:?}, before the {deadline:?} deadline"
        );
    }
    // Between requests too: the deadline is the idle timeout.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let asked = tokio::time::Instant::now();
    idle.write_all(b"GET /hello HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    let text = read_to_end(&mut idle).await;
    assert!(text.ends_with("hello"), "{text}");
    assert!(
        asked.elapsed() >= deadline,
        "an idle connection closed after {:?}, before the {deadline:?} deadline",
        asked.elapsed()
    );
}
