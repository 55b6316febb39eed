//! Differential testing against hyper: the same router served by this
//! crate's connection and by hyper's (both in this process, on loopback),
//! the same generated request streams sent to both — pipelined, chunked,
//! split at random byte boundaries, with the quirks request smugglers use —
//! and the answers compared: each response's status, its body (for 2xx and
//! 3xx: where each request ended shows in what `/echo` says it received),
//! and whether the connection closed after the last. They must agree, or
//! differ only as [`documented`] lists: where this crate is stricter — it
//! refuses the request with a 400 and closes, hyper takes it — or where
//! reuse after an unread body depends on timing (`closed_after_an_unread_body`).
//!
//! `AGWIRE_DIFF_SEED` replays one seed, in decimal or `0x` hex (as the
//! `agwire-core` differential test prints it; anything else fails the test);
//! `AGWIRE_DIFF_CASES` sets how many streams (default 2000, about a second).

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::{get, post};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn router() -> axum::Router {
    axum::Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route(
            "/echo",
            post(|body: Bytes| async move {
                format!("{}:{}", body.len(), String::from_utf8_lossy(&body))
            }),
        )
        .route(
            "/stream",
            get(|| async {
                let pieces = ["one ", "two ", "three"]
                    .map(|p| Ok::<_, std::io::Error>(Bytes::from_static(p.as_bytes())));
                axum::body::Body::from_stream(futures_util::stream::iter(pieces))
            }),
        )
        .route(
            "/empty",
            get(|| async { axum::http::StatusCode::NO_CONTENT }),
        )
}

async fn serve_ours() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config =
        agwire_http1::ServeConfig::default().header_read_timeout(Some(Duration::from_secs(10)));
    tokio::spawn(agwire_http1::serve_with(
        listener,
        router(),
        config,
        std::future::pending(),
    ));
    addr
}

async fn serve_hyper() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                let service = hyper_util::service::TowerToHyperService::new(router());
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    addr
}

/// One request of a generated stream: its bytes, its method (to frame its
/// answer), and the quirk it carries, if any.
struct Generated {
    bytes: Vec<u8>,
    head: bool,
    /// It carries a body its route does not read.
    unread: bool,
    quirk: Option<&'static str>,
}

/// The quirks: each breaks or bends one rule, the way smuggling attempts
/// and sloppy clients do.
const QUIRKS: &[&str] = &[
    "bare LF in a chunk extension",
    "chunk size without digits",
    "chunk extensions over 16 KiB",
    "transfer-encoding not ASCII",
    "transfer-encoding gzip, chunked",
    "transfer-encoding chunked, gzip",
    "transfer-encoding chunked twice",
    "transfer-encoding with content-length",
    "two equal content-lengths",
    "two equal content-lengths on one line",
    "two different content-lengths",
    "two content-lengths, the longer first",
    "transfer-encoding gzip then chunked on two lines",
    "content-length before transfer-encoding",
    "content-length with a sign",
    "missing host",
    "two hosts",
    "space before a header colon",
    "folded header line",
    "LF line endings",
    "empty lines before the request line",
    "request line in trailers",
    "bare LF in a trailer",
    "chunk data longer than its size",
    "uppercase CHUNKED",
    "HTTP/1.0 keep-alive",
    "HTTP/1.0 with transfer-encoding",
    "expect 100-continue",
    "chunk size with leading zeros",
    "chunk size with whitespace",
    "absolute-form target",
    "a body on GET",
    "unknown method",
    "long request target",
];

fn chunked_body(rng: &mut StdRng, body: &[u8], quirk: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = body;
    let mut first = true;
    while !rest.is_empty() {
        let n = rng.random_range(1..=rest.len());
        let size = match quirk {
            Some("chunk size with leading zeros") if first => format!("000{n:x}"),
            Some("chunk size with whitespace") if first => format!("{n:X} \t"),
            _ => format!("{n:x}"),
        };
        out.extend_from_slice(size.as_bytes());
        match quirk {
            // The line ends at the LF for a lenient parser, which then
            // reads a well-formed body: a strict one refuses it.
            Some("bare LF in a chunk extension") if first => out.extend_from_slice(b";a\n"),
            Some("chunk extensions over 16 KiB") => {
                out.extend_from_slice(format!(";e={}", "x".repeat(6000)).as_bytes());
            }
            _ if rng.random_bool(0.2) => out.extend_from_slice(b";name=value"),
            _ => {}
        }
        if !(first && quirk == Some("bare LF in a chunk extension")) {
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(&rest[..n]);
        if quirk == Some("chunk data longer than its size") && first {
            out.push(b'!');
        }
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
        first = false;
    }
    if quirk == Some("chunk size without digits") {
        out.extend_from_slice(b";x\r\n");
    } else {
        out.extend_from_slice(b"0\r\n");
    }
    match quirk {
        Some("request line in trailers") => out.extend_from_slice(b"GET /hello HTTP/1.1\r\n"),
        Some("bare LF in a trailer") => out.extend_from_slice(b"x-a: 1\nx-b: 2\r\n"),
        _ if rng.random_bool(0.2) => out.extend_from_slice(b"x-trailer: yes\r\n"),
        _ => {}
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn generate(rng: &mut StdRng, last: bool) -> Generated {
    let quirk = rng
        .random_bool(0.6)
        .then(|| QUIRKS[rng.random_range(0..QUIRKS.len())]);
    let route = rng.random_range(0..5);
    let (method, mut path) = match (route, quirk) {
        (_, Some("unknown method")) => ("BREW", "/hello"),
        (_, Some("a body on GET")) => ("GET", "/hello"),
        // A quirk of the body's framing needs a body to frame.
        (_, Some(q)) if framed_by_length(q) || framed_chunked(q) => ("POST", "/echo"),
        (0, _) => ("GET", "/hello"),
        (1, _) => ("HEAD", "/hello"),
        (2, _) => ("GET", "/stream"),
        (3, _) => ("GET", "/empty"),
        _ => ("POST", "/echo"),
    };
    let long_path;
    if quirk == Some("long request target") {
        long_path = format!("/hello?{}", "q".repeat(rng.random_range(1000..20_000)));
        path = &long_path;
    }
    let target = if quirk == Some("absolute-form target") {
        format!("http://a{path}")
    } else {
        path.to_owned()
    };
    let version = if matches!(
        quirk,
        Some("HTTP/1.0 keep-alive" | "HTTP/1.0 with transfer-encoding")
    ) {
        "HTTP/1.0"
    } else {
        "HTTP/1.1"
    };
    let eol = if quirk == Some("LF line endings") {
        "\n"
    } else {
        "\r\n"
    };
    let mut head = String::new();
    if quirk == Some("empty lines before the request line") {
        head.push_str("\r\n");
    }
    head.push_str(&format!("{method} {target} {version}{eol}"));
    match quirk {
        Some("missing host") => {}
        Some("two hosts") => head.push_str(&format!("host: a{eol}host: b{eol}")),
        Some("space before a header colon") => head.push_str(&format!("host : a{eol}")),
        _ => head.push_str(&format!("host: a{eol}")),
    }
    if quirk == Some("folded header line") {
        head.push_str(&format!("x-folded: a{eol} b{eol}"));
    }
    if quirk == Some("HTTP/1.0 keep-alive") {
        head.push_str(&format!("connection: keep-alive{eol}"));
    }
    if quirk == Some("expect 100-continue") {
        head.push_str(&format!("expect: 100-continue{eol}"));
    }
    let body: Vec<u8> = (0..rng.random_range(0..40))
        .map(|_| rng.random_range(b'a'..=b'z'))
        .collect();
    let with_body = method == "POST" || quirk == Some("a body on GET");
    let chunked = with_body
        && match quirk {
            Some(q) if framed_chunked(q) => true,
            Some(q) if framed_by_length(q) => false,
            _ => rng.random_bool(0.5),
        };
    let mut bytes_body = Vec::new();
    let mut extra = String::new();
    if chunked {
        let te: &[u8] = match quirk {
            Some("transfer-encoding not ASCII") => {
                b"transfer-encoding: chunked\r\ntransfer-encoding: gzip\xff\r\n"
            }
            Some("transfer-encoding gzip, chunked") => b"transfer-encoding: gzip, chunked\r\n",
            Some("transfer-encoding chunked, gzip") => b"transfer-encoding: chunked, gzip\r\n",
            Some("transfer-encoding chunked twice") => {
                b"transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n"
            }
            Some("uppercase CHUNKED") => b"transfer-encoding: CHUNKED\r\n",
            Some("transfer-encoding gzip then chunked on two lines") => {
                b"transfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n"
            }
            _ => b"transfer-encoding: chunked\r\n",
        };
        bytes_body = chunked_body(rng, &body, quirk);
        if matches!(
            quirk,
            Some(
                "transfer-encoding with content-length" | "content-length before transfer-encoding"
            )
        ) {
            // The smuggler's case is a length that disagrees with the
            // chunks: a server that framed by it would read the rest (or
            // the next request) as a request of its own.
            let chunked_len = bytes_body.len();
            let length = match rng.random_range(0..4) {
                0 => chunked_len,
                1 => rng.random_range(0..chunked_len),
                2 => chunked_len + rng.random_range(1..64),
                _ => 0,
            };
            let line = format!("content-length: {length}{eol}");
            if quirk == Some("content-length before transfer-encoding") {
                head.push_str(&line);
            } else {
                extra.push_str(&line);
            }
        }
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(te);
        return finish(bytes, extra, eol, &bytes_body, (method, path), quirk, last);
    }
    if with_body || rng.random_bool(0.1) {
        bytes_body = body;
        match quirk {
            Some("two equal content-lengths") => extra.push_str(&format!(
                "content-length: {0}{eol}content-length: {0}{eol}",
                bytes_body.len()
            )),
            Some("two equal content-lengths on one line") => {
                extra.push_str(&format!("content-length: {0}, {0}{eol}", bytes_body.len()));
            }
            Some("two different content-lengths") => extra.push_str(&format!(
                "content-length: {}{eol}content-length: {}{eol}",
                bytes_body.len(),
                bytes_body.len() + rng.random_range(1..8)
            )),
            Some("two content-lengths, the longer first") => extra.push_str(&format!(
                "content-length: {}{eol}content-length: {}{eol}",
                bytes_body.len() + rng.random_range(1..8),
                bytes_body.len()
            )),
            Some("content-length with a sign") => {
                extra.push_str(&format!("content-length: +{}{eol}", bytes_body.len()));
            }
            _ => extra.push_str(&format!("content-length: {}{eol}", bytes_body.len())),
        }
    }
    finish(
        head.into_bytes(),
        extra,
        eol,
        &bytes_body,
        (method, path),
        quirk,
        last,
    )
}

/// A quirk of a body framed by content-length alone.
fn framed_by_length(quirk: &str) -> bool {
    quirk.contains("content-length") && !framed_chunked(quirk)
}

/// A quirk of a chunked body (or of its transfer-encoding).
fn framed_chunked(quirk: &str) -> bool {
    quirk.contains("chunk")
        || quirk.contains("CHUNKED")
        || quirk.contains("trailer")
        || quirk.contains("transfer-encoding")
}

fn finish(
    mut bytes: Vec<u8>,
    mut extra: String,
    eol: &str,
    body: &[u8],
    (method, path): (&str, &str),
    quirk: Option<&'static str>,
    last: bool,
) -> Generated {
    let unread = !(body.is_empty() || method == "POST" && path == "/echo");
    if last {
        extra.push_str(&format!("connection: close{eol}"));
    }
    bytes.extend_from_slice(extra.as_bytes());
    bytes.extend_from_slice(eol.as_bytes());
    bytes.extend_from_slice(body);
    Generated {
        bytes,
        head: method == "HEAD",
        unread,
        quirk,
    }
}

/// What a server did with a stream: its answers, and how the connection
/// ended.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    /// (status, body) of each final answer; the body only for 2xx/3xx
    /// (an error's text is each server's own).
    answers: Vec<(u16, String)>,
    /// "closed", or "open" when the server still waited after the
    /// deadline (for bytes that never come).
    end: &'static str,
}

async fn run(addr: SocketAddr, stream: &[u8], splits: &[usize], heads: &[bool]) -> Outcome {
    let socket = TcpStream::connect(addr).await.unwrap();
    socket.set_nodelay(true).unwrap();
    let (mut reader, mut writer) = socket.into_split();
    let pieces: Vec<Vec<u8>> = {
        let mut out = Vec::new();
        let mut at = 0;
        for &cut in splits {
            out.push(stream[at..cut].to_vec());
            at = cut;
        }
        out.push(stream[at..].to_vec());
        out
    };
    let sender = tokio::spawn(async move {
        for piece in pieces {
            if writer.write_all(&piece).await.is_err() {
                break;
            }
            tokio::task::yield_now().await;
        }
        writer
    });
    let mut seen = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let end = loop {
        match tokio::time::timeout_at(deadline, reader.read(&mut buf)).await {
            Err(_) => break "open",
            Ok(Ok(0) | Err(_)) => break "closed",
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
        }
    };
    let _ = sender.await;
    Outcome {
        answers: parse_answers(&seen, heads),
        end,
    }
}

/// Splits what a server sent into its final answers (1xx skipped).
fn parse_answers(mut bytes: &[u8], heads: &[bool]) -> Vec<(u16, String)> {
    let mut answers = Vec::new();
    let mut request = 0;
    loop {
        if bytes.is_empty() {
            return answers;
        }
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut fields);
        let Ok(httparse::Status::Complete(len)) = response.parse(bytes) else {
            answers.push((
                0,
                format!("unparsable: {:?}", String::from_utf8_lossy(bytes)),
            ));
            return answers;
        };
        let status = response.code.unwrap_or(0);
        let header = |name: &str| {
            response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).to_lowercase())
        };
        let length = header("content-length").and_then(|v| v.parse::<usize>().ok());
        let chunked = header("transfer-encoding").is_some_and(|v| v.contains("chunked"));
        bytes = &bytes[len..];
        if (100..200).contains(&status) {
            continue;
        }
        let head = heads.get(request).copied().unwrap_or(false);
        request += 1;
        let body: Vec<u8> = if head || status == 204 || status == 304 {
            Vec::new()
        } else if chunked {
            let mut body = Vec::new();
            loop {
                let Some(line) = bytes.windows(2).position(|w| w == b"\r\n") else {
                    bytes = &[];
                    break;
                };
                let size = usize::from_str_radix(
                    String::from_utf8_lossy(&bytes[..line])
                        .split(';')
                        .next()
                        .unwrap_or(""),
                    16,
                )
                .unwrap_or(0);
                bytes = &bytes[line + 2..];
                if size == 0 {
                    bytes = bytes.get(2..).unwrap_or(&[]);
                    break;
                }
                let take = size.min(bytes.len());
                body.extend_from_slice(&bytes[..take]);
                bytes = bytes.get(take + 2..).unwrap_or(&[]);
            }
            body
        } else if let Some(n) = length {
            let take = n.min(bytes.len());
            let body = bytes[..take].to_vec();
            bytes = &bytes[take..];
            body
        } else {
            std::mem::take(&mut bytes).to_vec()
        };
        let body = if status < 400 {
            String::from_utf8_lossy(&body).into_owned()
        } else {
            String::new()
        };
        answers.push((status, body));
    }
}

/// Where this crate is stricter than hyper, on purpose: the quirk, and why.
/// A case carrying one of these may differ; any other difference fails.
fn documented(quirk: &str) -> Option<&'static str> {
    Some(match quirk {
        "missing host" | "two hosts" => {
            "RFC 9112 §3.2: an HTTP/1.1 request with no Host or two is a 400 (hyper takes it; nginx refuses it)"
        }
        "transfer-encoding with content-length" | "content-length before transfer-encoding" => {
            "both framings at once is a 400 (hyper drops the length and closes after the answer)"
        }
        "transfer-encoding chunked twice" => {
            "RFC 9112 §6.1: chunked is applied once; chunked twice is a 400 (hyper reads the last only)"
        }
        "bare LF in a trailer" => {
            "a trailer line ends with CRLF only, like every other line of the body (hyper keeps an LF inside a trailer line)"
        }
        "HTTP/1.0 keep-alive" | "expect 100-continue" | "a body on GET" => {
            // Not stricter: these differ only in when a connection may be
            // reused, checked below on what was answered.
            return None;
        }
        _ => return None,
    })
}

/// How a difference at the `at`-th request, which carries a documented
/// quirk, may look: the answers before it agree, and this crate is the
/// stricter side — it refuses that request with a 400 and closes, so that
/// nothing after it is answered (hyper, the lenient side, may answer it
/// and go on). `Err` says what else happened.
fn stricter_at(ours: &Outcome, hyper: &Outcome, at: usize) -> Result<(), String> {
    let before = |o: &Outcome| o.answers.iter().take(at).cloned().collect::<Vec<_>>();
    if before(ours) != before(hyper) {
        return Err(format!("the answers before request {at} differ"));
    }
    if ours.answers.get(at).map(|a| a.0) != Some(400) {
        return Err(format!(
            "request {at} is not refused here (hyper: {:?}), so this crate is not the stricter side",
            hyper.answers.get(at)
        ));
    }
    if ours.answers.len() != at + 1 || ours.end != "closed" {
        return Err(format!(
            "after refusing request {at} this crate must close with nothing more answered"
        ));
    }
    Ok(())
}

/// The one difference in timing both servers have: after an answer to a
/// request whose body the handler did not read, each reuses the connection
/// only if the rest of that body has already arrived (hyper: with one more
/// read; here: with the head), and closes it otherwise — so the client
/// retries what follows. Which it is depends on how the bytes were split,
/// so either may be the one that closes. The side that closed must be the
/// one that answered less, right after its answer to the request with the
/// unread body, with the same answers the other gave so far; the other
/// answers no more requests than were sent and closes too (the last one
/// asks it to). `Some(side that closed)` when that is what happened.
fn closed_after_an_unread_body(
    ours: &Outcome,
    hyper: &Outcome,
    unread: &[bool],
) -> Option<&'static str> {
    let (closer, short, long) = match ours.answers.len().cmp(&hyper.answers.len()) {
        std::cmp::Ordering::Less => ("ours", ours, hyper),
        std::cmp::Ordering::Greater => ("hyper", hyper, ours),
        std::cmp::Ordering::Equal => return None,
    };
    let last = short.answers.len().checked_sub(1)?;
    let closed_after_unread = short.end == "closed"
        && long.answers.starts_with(&short.answers)
        && unread.get(last).copied().unwrap_or(false)
        && long.answers.len() <= unread.len()
        && long.end == "closed";
    closed_after_unread.then_some(closer)
}

/// A number in decimal or in `0x` hex (as `agwire-core`'s differential
/// test prints its `AGWIRE_DIFF_SEED`).
fn parse_number(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The number in the variable `name`, if it is set; one set but not a
/// number fails the test (a typo must not turn into a random seed).
fn env_number(name: &str) -> Option<u64> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(value)) => {
            panic!("{name}={value:?} is not a number (decimal or 0x hex)")
        }
        Ok(value) => Some(
            parse_number(&value)
                .unwrap_or_else(|| panic!("{name}={value:?} is not a number (decimal or 0x hex)")),
        ),
    }
}

#[test]
fn a_seed_reads_in_decimal_and_in_hex() {
    assert_eq!(
        parse_number("540401210352225003"),
        Some(540_401_210_352_225_003)
    );
    assert_eq!(
        parse_number("0x77fe5d4a8c0b1eb"),
        Some(0x077f_e5d4_a8c0_b1eb)
    );
    assert_eq!(parse_number("0XFF"), Some(255));
    assert_eq!(parse_number(" 12 "), Some(12));
    for bad in ["", "0x", "ff", "0xzz", "-1", "1.5", "0x1_0", "seed"] {
        assert_eq!(parse_number(bad), None, "{bad:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_agree_with_hyper_on_generated_request_streams() {
    let seed = env_number("AGWIRE_DIFF_SEED").unwrap_or_else(rand::random::<u64>);
    let cases = env_number("AGWIRE_DIFF_CASES").map_or(2000, |n| {
        usize::try_from(n).expect("AGWIRE_DIFF_CASES fits in a usize")
    });
    println!(
        "differential vs hyper: seed {seed} = {seed:#x} (AGWIRE_DIFF_SEED={seed} or {seed:#x} replays it), {cases} streams"
    );
    let ours = serve_ours().await;
    let hyper = serve_hyper().await;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut disagreements = Vec::new();
    let mut explained = std::collections::BTreeMap::<&str, usize>::new();
    let mut quirks_seen = std::collections::BTreeSet::new();
    let mut closed_by = std::collections::BTreeMap::<&str, usize>::new();
    let mut requests = 0;
    for case in 0..cases {
        let count = rng.random_range(1..=4);
        let generated: Vec<Generated> = (0..count)
            .map(|i| generate(&mut rng, i + 1 == count))
            .collect();
        let stream: Vec<u8> = generated.iter().flat_map(|g| g.bytes.clone()).collect();
        let heads: Vec<bool> = generated.iter().map(|g| g.head).collect();
        let unread: Vec<bool> = generated.iter().map(|g| g.unread).collect();
        let mut splits: Vec<usize> = (0..rng.random_range(0..6))
            .map(|_| rng.random_range(0..=stream.len()))
            .collect();
        splits.sort_unstable();
        requests += count;
        let quirks: Vec<&str> = generated.iter().filter_map(|g| g.quirk).collect();
        quirks_seen.extend(quirks.iter().copied());
        let (a, b) = tokio::join!(
            run(ours, &stream, &splits, &heads),
            run(hyper, &stream, &splits, &heads)
        );
        if a == b {
            continue;
        }
        if let Some(closer) = closed_after_an_unread_body(&a, &b, &unread) {
            *closed_by.entry(closer).or_default() += 1;
            *explained
                .entry("reuse after a body the handler did not read depends on when its bytes arrived (both servers)")
                .or_default() += 1;
            continue;
        }
        // A documented quirk: this crate is the stricter side there.
        let first_documented = generated
            .iter()
            .position(|g| g.quirk.and_then(documented).is_some());
        let why_not = match first_documented {
            Some(at) => match stricter_at(&a, &b, at) {
                Ok(()) => {
                    let why = generated[at].quirk.and_then(documented).unwrap_or_default();
                    *explained.entry(why).or_default() += 1;
                    continue;
                }
                Err(why_not) => why_not,
            },
            None => "no documented quirk explains it".to_owned(),
        };
        disagreements.push(format!(
            "case {case} (quirks {quirks:?}): {why_not}\n  request: {:?}\n  ours:  {a:?}\n  hyper: {b:?}",
            String::from_utf8_lossy(&stream)
        ));
    }
    println!(
        "{requests} requests in {cases} streams; quirks used: {}",
        quirks_seen.len()
    );
    for (why, n) in &explained {
        println!("  allowed difference ({n} streams): {why}");
    }
    println!("  closed after an unread body, by side: {closed_by:?}");
    assert!(
        disagreements.is_empty(),
        "seed {seed}: {} unexplained disagreements with hyper:\n{}",
        disagreements.len(),
        disagreements
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        quirks_seen.len() >= QUIRKS.len() * 3 / 4,
        "too few quirks generated: {quirks_seen:?}"
    );
    if cases >= 500 {
        // The framing a header sent twice makes, and a length that
        // disagrees with the chunks, are compared on every full run.
        for must in [
            "transfer-encoding chunked twice",
            "two equal content-lengths",
            "two equal content-lengths on one line",
            "two different content-lengths",
            "two content-lengths, the longer first",
            "transfer-encoding with content-length",
            "content-length before transfer-encoding",
        ] {
            assert!(quirks_seen.contains(must), "{must:?} never generated");
        }
    }
}
