//! Opens N idle AG-UI streams against a server and reports how much resident
//! memory the server grew by per open stream (`bench/http.sh` calls it).
//!
//! Usage: idle_streams --addr 127.0.0.1:PORT --path /idle --pid SERVER_PID [--count 10000]
//!
//! Each stream is a real HTTP/1.1 POST whose response has started (the first
//! SSE event, RUN_STARTED, was read) and then stays open with nothing to send.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .map(|i| args[i + 1].clone())
}

fn rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("server pid");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .expect("VmRSS")
}

async fn open(addr: String, path: String) -> TcpStream {
    let body = r#"{"threadId":"t","runId":"r","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{}}"#;
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut socket = TcpStream::connect(&addr).await.expect("connect");
    socket.write_all(request.as_bytes()).await.unwrap();
    // Read until the first event has arrived: the run is live.
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.windows(11).any(|w| w == b"RUN_STARTED") {
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "server closed the stream");
        seen.extend_from_slice(&buf[..n]);
    }
    socket
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let addr = arg("--addr").expect("--addr");
    let path = arg("--path").unwrap_or_else(|| "/idle".into());
    let pid = arg("--pid").expect("--pid");
    let count: usize = arg("--count").map_or(10_000, |c| c.parse().unwrap());

    // Warm the server up (allocator arenas, first-connection costs) first.
    let warm: Vec<_> = futures(&addr, &path, 100).await;
    drop(warm);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(&pid);
    let streams = futures(&addr, &path, count).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = rss_kib(&pid);
    let per = (after.saturating_sub(before)) as f64 / count as f64;
    println!(
        "{{\"streams\":{count},\"rss_before_kib\":{before},\"rss_after_kib\":{after},\"kib_per_stream\":{per:.2}}}"
    );
    drop(streams);
}

/// Opens `count` streams, at most 256 connecting at once.
async fn futures(addr: &str, path: &str, count: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(count);
    let mut pending = tokio::task::JoinSet::new();
    let mut started = 0;
    while out.len() < count {
        while started < count && pending.len() < 256 {
            pending.spawn(open(addr.to_owned(), path.to_owned()));
            started += 1;
        }
        out.push(pending.join_next().await.unwrap().unwrap());
    }
    out
}
