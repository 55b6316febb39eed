//! The connection over real TCP, byte by byte, against each way a lenient
//! HTTP/1.1 server has been found to go wrong: each test
//! sends what an attacker would and checks what a strict server (RFC 9112,
//! hyper) answers — and, where it matters, that nothing hidden behind the
//! bad bytes is answered.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agwire_http1::ServeConfig;
use agwire_testkit::raw_http::{DropFlag, comes_true, exchange, read_to_end, read_until, statuses};
use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn app(dropped: &Arc<AtomicBool>) -> axum::Router {
    let flag = dropped.clone();
    axum::Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route(
            "/echo",
            post(|body: Bytes| async move {
                format!("{}:{}", body.len(), String::from_utf8_lossy(&body))
            }),
        )
        // Answers at once, then reads the body to its end in the background
        // (how a 413 lets a client that ignores `Expect` finish sending).
        .route(
            "/linger",
            post(|body: axum::body::Body| async move {
                tokio::spawn(async move {
                    let _ = axum::body::to_bytes(body, usize::MAX).await;
                });
                StatusCode::PAYLOAD_TOO_LARGE
            }),
        )
        // Answers at once and keeps the body without ever reading it.
        .route(
            "/hold",
            post(|body: axum::body::Body| async move {
                tokio::spawn(async move {
                    // Held until the test's runtime ends.
                    std::future::pending::<()>().await;
                    drop(body);
                });
                "held"
            }),
        )
        // Says 3 bytes and gives 10.
        .route(
            "/overlong",
            get(|| async {
                let body = axum::body::Body::from_stream(futures_util::stream::iter([Ok::<
                    _,
                    std::io::Error,
                >(
                    Bytes::from_static(b"abcdefghij"),
                )]));
                (
                    [(header::CONTENT_LENGTH, HeaderValue::from_static("3"))],
                    body,
                )
                    .into_response()
            }),
        )
        // Framing headers of its own, all wrong for its 5-byte body.
        .route(
            "/framing",
            get(|| async {
                (
                    [
                        (header::CONTENT_LENGTH, HeaderValue::from_static("100")),
                        (header::TRANSFER_ENCODING, HeaderValue::from_static("gzip")),
                        (header::CONNECTION, HeaderValue::from_static("upgrade")),
                    ],
                    "five!",
                )
                    .into_response()
            }),
        )
        // An event stream that never ends on its own.
        .route(
            "/stream",
            get(move || {
                let guard = DropFlag(flag.clone());
                async move {
                    let events = futures_util::StreamExt::chain(
                        futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(
                            b"data: first\n\n",
                        ))]),
                        futures_util::stream::poll_fn(move |_| {
                            let _ = &guard;
                            std::task::Poll::Pending
                        }),
                    );
                    axum::body::Body::from_stream(events)
                }
            }),
        )
}

async fn start(config: ServeConfig) -> (SocketAddr, Arc<AtomicBool>) {
    let dropped = Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(agwire_http1::serve_with(
        listener,
        app(&dropped),
        config,
        std::future::pending(),
    ));
    (addr, dropped)
}

/// A chunked request whose body is framed by `body`, followed by a second
/// request that must only be answered if the first body ended where a
/// strict parser says it does.
fn smuggle(body: &str) -> Vec<u8> {
    format!(
        "POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n{body}GET /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n"
    )
    .into_bytes()
}

#[tokio::test]
async fn a_bare_lf_in_a_chunk_extension_ends_the_connection_and_hides_nothing() {
    let (addr, _) = start(ServeConfig::default()).await;
    // httparse's chunk-size parser takes any byte in an extension, a bare
    // LF included, up to CRLF: to it "0;a\nx" is the last chunk, and the
    // bytes after the body's end are a second request, answered. A front end
    // that ends the line at the LF frames the same bytes differently (a
    // trailer line "x"); the two disagree about where requests are, which is
    // how a request is smuggled. Refused here, as hyper refuses it.
    let text = exchange(addr, &smuggle("0;a\nx\r\n\r\n")).await;
    assert!(
        !text.contains("hello"),
        "a request hidden in the body was answered: {text}"
    );
    assert_eq!(statuses(&text), ["400"], "{text}");
}

#[tokio::test]
async fn a_chunk_size_with_no_digits_is_not_the_last_chunk() {
    let (addr, _) = start(ServeConfig::default()).await;
    for body in ["\r\n", ";x\r\n"] {
        let text = exchange(addr, &smuggle(body)).await;
        assert!(
            !text.contains("hello"),
            "{body:?}: the body was taken as ended: {text}"
        );
        assert_eq!(statuses(&text), ["400"], "{body:?}: {text}");
    }
}

#[tokio::test]
async fn chunk_extensions_are_bounded_per_body() {
    let (addr, _) = start(ServeConfig::default()).await;
    // 4 KiB of extensions on each of 5 chunks: 20 KiB in one body.
    let ext = "e".repeat(4096);
    let body: String = (0..5)
        .map(|_| format!("1;{ext}\r\nx\r\n"))
        .collect::<String>()
        + "0\r\n\r\n";
    let text = exchange(addr, &smuggle(&body)).await;
    assert_eq!(statuses(&text), ["400"], "{text}");
    // One chunk with 5,000 bytes of extension is within the bound.
    let body = format!("1;{}\r\nx\r\n0\r\n\r\n", "e".repeat(5000));
    let text = exchange(addr, &smuggle(&body)).await;
    assert_eq!(statuses(&text), ["200", "200"], "{text}");
    assert!(text.contains("1:x") && text.ends_with("hello"), "{text}");
}

#[tokio::test]
async fn a_transfer_encoding_value_that_is_not_ascii_is_400() {
    let (addr, _) = start(ServeConfig::default()).await;
    let text = exchange(
        addr,
        b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\ntransfer-encoding: gzip\xff\r\n\r\n0\r\n\r\n",
    )
    .await;
    assert_eq!(statuses(&text), ["400"], "{text}");
    assert!(text.contains("transfer-encoding"), "{text}");
}

#[tokio::test]
async fn trailers_must_be_fields_and_are_bounded() {
    let (addr, _) = start(ServeConfig::default()).await;
    // A request line among the trailers.
    let text = exchange(addr, &smuggle("0\r\nGET /hello HTTP/1.1\r\n\r\n")).await;
    assert_eq!(statuses(&text), ["400"], "{text}");
    // 3 MB of trailers: refused at 16 KiB, long before the rest is sent.
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n0\r\n")
        .await
        .unwrap();
    let line = "x-trailer: 0123456789012345678901234567890123456789\r\n".repeat(100);
    let mut sent = 0usize;
    let refused = loop {
        if socket.write_all(line.as_bytes()).await.is_err() {
            break true;
        }
        sent += line.len();
        if sent > 3_000_000 {
            break false;
        }
        // An answer before the end means the server stopped reading.
        let mut peek = [0u8; 1];
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(1), socket.peek(&mut peek)).await
            && n > 0
        {
            break true;
        }
    };
    assert!(refused, "3 MB of trailers were read");
    let text = read_to_end(&mut socket).await;
    assert!(text.is_empty() || statuses(&text) == ["400"], "{text}");
}

#[tokio::test]
async fn a_request_target_past_the_head_limit_is_414() {
    let (addr, _) = start(ServeConfig::default()).await;
    let uri = "a".repeat(100_000);
    let text = exchange(
        addr,
        format!("GET /{uri} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes(),
    )
    .await;
    assert_eq!(statuses(&text), ["414"], "{text}");
    // Under a head limit large enough for it, still past what a URI may be.
    let (addr, _) = start(ServeConfig::default().max_head_bytes(256 * 1024)).await;
    let text = exchange(
        addr,
        format!("GET /{uri} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes(),
    )
    .await;
    assert_eq!(statuses(&text), ["414"], "{text}");
    assert!(text.contains(r#"{"detail":"#), "{text}");
}

#[tokio::test]
async fn http_1_1_needs_exactly_one_host() {
    let (addr, _) = start(ServeConfig::default()).await;
    for request in [
        &b"GET /hello HTTP/1.1\r\n\r\n"[..],
        b"GET /hello HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n",
    ] {
        let text = exchange(addr, request).await;
        assert_eq!(statuses(&text), ["400"], "{text}");
        assert!(text.contains("host header"), "{text}");
    }
    let text = exchange(
        addr,
        b"GET /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(text.ends_with("hello"), "{text}");
}

#[tokio::test]
async fn a_response_past_its_length_is_cut_and_the_connection_closed() {
    let (addr, _) = start(ServeConfig::default()).await;
    let text = exchange(
        addr,
        b"GET /overlong HTTP/1.1\r\nhost: a\r\n\r\nGET /hello HTTP/1.1\r\nhost: a\r\n\r\n",
    )
    .await;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert_eq!(
        body, "abc",
        "bytes past the declared length reached the wire: {text}"
    );
    assert_eq!(statuses(&text), ["200"], "{text}");
}

#[tokio::test]
async fn the_handlers_framing_headers_do_not_frame_the_response() {
    let (addr, _) = start(ServeConfig::default()).await;
    let text = exchange(
        addr,
        b"GET /framing HTTP/1.1\r\nhost: a\r\n\r\nGET /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(statuses(&text), ["200", "200"], "{text}");
    assert!(text.contains("content-length: 5\r\n"), "{text}");
    assert!(
        !text.contains("content-length: 100")
            && !text.contains("gzip")
            && !text.contains("upgrade"),
        "{text}"
    );
    assert!(text.contains("five!") && text.ends_with("hello"), "{text}");
}

#[tokio::test]
async fn no_100_continue_after_the_final_answer() {
    let (addr, _) = start(ServeConfig::default()).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"POST /linger HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 4\r\n\r\n")
        .await
        .unwrap();
    let first = read_until(&mut socket, "\r\n\r\n").await;
    assert!(first.starts_with("HTTP/1.1 413 "), "{first}");
    // The client sends its body anyway (as curl does after a second).
    socket.write_all(b"abcd").await.unwrap();
    socket
        .write_all(b"GET /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let rest = read_to_end(&mut socket).await;
    let text = first + &rest;
    assert!(
        !text.contains("100 Continue"),
        "an interim answer after the final one: {text}"
    );
}

#[tokio::test]
async fn a_head_answer_has_no_made_up_length() {
    let (addr, _) = start(ServeConfig::default()).await;
    let text = exchange(
        addr,
        b"HEAD /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(statuses(&text), ["200"], "{text}");
    assert!(!text.contains("content-length: 0"), "{text}");
    assert!(
        text.ends_with("\r\n\r\n"),
        "a HEAD answer with a body: {text}"
    );
}

#[tokio::test]
async fn a_handler_that_holds_its_body_unread_does_not_hold_the_connection() {
    let deadline = Duration::from_millis(500);
    let (addr, _) = start(ServeConfig::default().header_read_timeout(Some(deadline))).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let started = tokio::time::Instant::now();
    socket
        .write_all(b"POST /hold HTTP/1.1\r\nhost: a\r\ncontent-length: 10\r\n\r\n")
        .await
        .unwrap();
    let text = read_to_end(&mut socket).await;
    assert!(text.ends_with("held"), "{text}");
    assert!(
        started.elapsed() >= deadline,
        "closed before the deadline: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_client_that_pipelines_past_64_kib_and_leaves_is_still_seen() {
    let (addr, dropped) = start(ServeConfig::default()).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"GET /stream HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    let text = read_until(&mut socket, "first").await;
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    let request = b"GET /hello HTTP/1.1\r\nhost: a\r\n\r\n";
    for _ in 0..(100 * 1024 / request.len()) {
        socket.write_all(request).await.unwrap();
    }
    assert!(!dropped.load(Ordering::SeqCst), "the stream is open");
    drop(socket);
    assert!(comes_true(&dropped).await, "the client left unseen");
}

#[tokio::test]
async fn a_huge_header_limit_is_clamped_not_a_panic() {
    let (addr, _) = start(
        ServeConfig::default()
            .max_headers(100_000)
            .max_head_bytes(4 << 20),
    )
    .await;
    let headers = "a: b\r\n".repeat(agwire_http1::MAX_HEADERS_CEILING + 1);
    let text = exchange(
        addr,
        format!("GET /hello HTTP/1.1\r\nhost: a\r\n{headers}\r\n").as_bytes(),
    )
    .await;
    assert_eq!(statuses(&text), ["431"], "{text}");
    let text = exchange(
        addr,
        b"GET /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(text.ends_with("hello"), "the server survived: {text}");
}

#[tokio::test]
async fn connections_past_the_limit_wait_for_a_free_one() {
    // With a per-address share above the limit, the limit is what holds
    // the third back (queued, not refused).
    for config in [
        ServeConfig::default().max_connections(Some(2)),
        ServeConfig::default()
            .max_connections(Some(2))
            .max_connections_per_peer(Some(3)),
    ] {
        past_the_limit(config).await;
    }
}

async fn past_the_limit(config: ServeConfig) {
    let (addr, _) = start(config).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket
            .write_all(b"GET /hello HTTP/1.1\r\nhost: a\r\n\r\n")
            .await
            .unwrap();
        let text = read_until(&mut socket, "hello").await;
        assert!(text.ends_with("hello"), "{text}");
        held.push(socket);
    }
    // The third connects (the kernel's queue) but is not served...
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(300), third.peek(&mut byte)).await;
    assert!(
        early.is_err(),
        "a third connection was served past a limit of two"
    );
    // ...until one of the two closes.
    drop(held.pop());
    let text = read_to_end(&mut third).await;
    assert!(text.ends_with("hello"), "{text}");
}
