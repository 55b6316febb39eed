//! Time from a reconnect (`Last-Event-ID`) to the first replayed event of a
//! finished run on a running `agwire serve`: TCP connect, request, and the
//! log read from the database until the first `data:` frame arrives.
//!
//! Usage: `service_reconnect <host:port> [reconnects (default 2000)]`.
//! Prints p50/p90/p99/max in microseconds.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends one raw HTTP/1.1 request and reads until `stop` appears in the
/// response (or the connection closes); returns what was read and how long
/// the first `stop` took.
async fn exchange(addr: &str, request: &str, stop: &[u8]) -> std::io::Result<(Vec<u8>, Duration)> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    stream.write_all(request.as_bytes()).await?;
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok((buf, started.elapsed()));
        }
        buf.extend_from_slice(&chunk[..n]);
        if !stop.is_empty() && buf.windows(stop.len()).any(|w| w == stop) {
            return Ok((buf, started.elapsed()));
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let count: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(2000);

    // One finished run with a long log: 200 streamed words.
    let words: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
    let thread = format!(
        "{:08x}-0000-4000-a000-{:012x}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() as u64 & 0xffff_ffff_ffff
    );
    let run_id = format!("reconnect-bench-{}", std::process::id());
    let body = format!(
        r#"{{"threadId":"{thread}","runId":"{run_id}","messages":[{{"id":"u","role":"user","content":"{}"}}],"forwardedProps":{{"runtime_mode":"chat"}}}}"#,
        words.join(" ")
    );
    let post = format!(
        "POST /api/v1/agent/runs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (streamed, _) = exchange(&addr, &post, b"").await?;
    let frames = streamed.windows(6).filter(|w| w == b"data: ").count();
    if frames < 10 {
        eprintln!(
            "the run did not stream: {}",
            String::from_utf8_lossy(&streamed)
        );
        std::process::exit(1);
    }
    let mut micros = Vec::with_capacity(count);
    for i in 0..count {
        // Every cut point but the last (after it there is nothing to replay).
        let after = i % (frames - 1);
        let request = format!(
            "GET /api/v1/agent/runs/{run_id}/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nLast-Event-ID: {after}\r\nConnection: close\r\n\r\n"
        );
        let (_, took) = exchange(&addr, &request, b"\ndata: ").await?;
        micros.push(took.as_micros() as u64);
    }
    micros.sort_unstable();
    let at = |q: f64| micros[((micros.len() - 1) as f64 * q) as usize];
    println!(
        "reconnect -> first replayed event ({count} reconnects, run of {frames} events): p50 {} us, p90 {} us, p99 {} us, max {} us",
        at(0.5),
        at(0.9),
        at(0.99),
        micros[micros.len() - 1]
    );
    Ok(())
}
