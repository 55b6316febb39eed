//! The per-peer share of the connection slots
//! (`ServeConfig::max_connections_per_peer`) over real TCP: one client
//! address cannot take every slot, others are served meanwhile, and a
//! closed connection gives its slot back. Other client addresses are other
//! loopback addresses (all of 127.0.0.0/8 is loopback on Linux).

use std::net::SocketAddr;
use std::time::Duration;

use agwire_http1::ServeConfig;
use agwire_testkit::raw_http::{read_to_end, read_until, statuses};
use axum::routing::get;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

const REFUSAL_BODY: &str = r#"{"detail":"too many connections from this address"}"#;

async fn start(config: ServeConfig) -> SocketAddr {
    let app = axum::Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route(
            "/panic",
            get(|| async {
                panic!("a handler that panics");
                #[allow(unreachable_code)]
                "unreachable"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(agwire_http1::serve_with(
        listener,
        app,
        config,
        std::future::pending(),
    ));
    addr
}

/// A connection to `server` from the loopback address `from`.
async fn connect_from(from: &str, server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(from.parse().unwrap(), 0))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), socket.connect(server))
        .await
        .expect("connected in time")
        .unwrap()
}

/// A kept-alive connection from `from` that has been served once.
async fn served(from: &str, server: SocketAddr) -> TcpStream {
    let mut socket = connect_from(from, server).await;
    socket
        .write_all(b"GET /hello HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    let text = read_until(&mut socket, "hello").await;
    assert!(
        text.starts_with("HTTP/1.1 200 ") && text.ends_with("hello"),
        "{from}: {text}"
    );
    socket
}

/// What a new connection from `from` asking for `/hello` gets, to the close.
async fn ask(from: &str, server: SocketAddr) -> String {
    let mut socket = connect_from(from, server).await;
    // The refusal may already have shut the server's side; the request is
    // still taken (and dropped) until the client closes.
    let _ = socket
        .write_all(b"GET /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        .await;
    read_to_end(&mut socket).await
}

fn assert_refused(text: &str) {
    assert_eq!(statuses(text), ["503"], "{text}");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
    assert!(
        head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{text}"
    );
    for header in [
        "content-type: application/json",
        "connection: close",
        "retry-after: 1",
    ] {
        assert!(head.contains(&format!("\r\n{header}")), "{header}: {text}");
    }
    assert_eq!(body, REFUSAL_BODY, "{text}");
}

/// Asks from `from` until served, while each refusal is the 503; panics
/// if not served within ten seconds.
async fn served_again(from: &str, server: SocketAddr) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = ask(from, server).await;
        if text.ends_with("hello") {
            assert_eq!(statuses(&text), ["200"], "{text}");
            return;
        }
        assert_refused(&text);
        assert!(
            tokio::time::Instant::now() < deadline,
            "{from} not served again in time"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn one_address_gets_its_share_and_a_503_past_it() {
    let server = start(ServeConfig::default().max_connections_per_peer(Some(3))).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(served("127.0.0.1", server).await);
    }
    // The fourth from the same address: the 503 at once, nothing served,
    // and a close, not a reset. A reset (the server closing with the request
    // unread) can destroy an answer still on its way; on loopback the answer
    // has arrived, but the reset leaves its error on the socket.
    let mut fourth = connect_from("127.0.0.1", server).await;
    fourth
        .write_all(b"GET /hello HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    assert_refused(&read_to_end(&mut fourth).await);
    assert!(
        fourth.take_error().unwrap().is_none(),
        "the refusal reset the connection"
    );
    drop(fourth);
    // Another address is served meanwhile, and counted apart.
    let _other = served("127.0.0.2", server).await;
    // One of the three closes: the first address is served again...
    drop(held.pop());
    served_again("127.0.0.1", server).await;
    // ...and that connection's end gives back one slot only: with three
    // still held again, the next is refused.
    held.push(served("127.0.0.1", server).await);
    assert_refused(&ask("127.0.0.1", server).await);
}

#[tokio::test]
async fn a_refusal_holds_no_global_slot() {
    // Two slots in all, one per address. The refused client keeps its
    // connection open, so its refusal lingers (up to the 30 s header read
    // timeout, past the 10 s read bound); the other address must still find
    // the second slot free.
    let server = start(
        ServeConfig::default()
            .max_connections(Some(2))
            .max_connections_per_peer(Some(1)),
    )
    .await;
    let _first = served("127.0.0.1", server).await;
    let mut refused = connect_from("127.0.0.1", server).await;
    refused
        .write_all(b"GET /hello HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    assert_refused(&read_to_end(&mut refused).await);
    let _other = served("127.0.0.2", server).await;
    drop(refused);
}

#[tokio::test]
async fn a_connection_that_panics_gives_its_slot_back() {
    let server = start(ServeConfig::default().max_connections_per_peer(Some(1))).await;
    let mut socket = connect_from("127.0.0.1", server).await;
    socket
        .write_all(b"GET /panic HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    // The handler's panic ends the connection's task unanswered.
    let text = read_to_end(&mut socket).await;
    assert!(text.is_empty(), "{text}");
    served_again("127.0.0.1", server).await;
}
