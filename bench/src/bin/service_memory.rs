//! Memory of a running `agwire serve` over many runs: rounds of runs, each
//! a POST answered with the run's whole stream (so every run is accepted,
//! executed, streamed and ended), then the server's resident memory and its
//! live-channel and executing gauges once the round has settled. A service
//! that keeps nothing per finished run shows a flat curve after warm-up.
//!
//! Usage: `service_memory <host:port> <server pid> [rounds (10)] [runs per
//! round (1000)] [concurrent clients (16)]`. Prints one line per round and
//! exits non-zero if a run did not end with its terminal event.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One run, start to end: its whole SSE stream.
async fn run(addr: &str, n: usize, salt: u64) -> std::io::Result<bool> {
    let thread = format!("{salt:08x}-0000-4000-a000-{n:012x}");
    let body = format!(
        r#"{{"threadId":"{thread}","runId":"mem-{salt:x}-{n}","messages":[{{"id":"u","role":"user","content":"tell me something about the memory of servers"}}],"forwardedProps":{{"runtime_mode":"chat"}}}}"#
    );
    let request = format!(
        "POST /api/v1/agent/runs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(request.as_bytes()).await?;
    let mut received = Vec::with_capacity(8 * 1024);
    stream.read_to_end(&mut received).await?;
    let text = String::from_utf8_lossy(&received);
    Ok(text.starts_with("HTTP/1.1 200") && text.contains("\"type\":\"RUN_FINISHED\""))
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

async fn gauge(addr: &str, name: &str) -> String {
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return "?".into();
    };
    let _ = stream.write_all(request.as_bytes()).await;
    let mut received = String::new();
    let _ = stream.read_to_string(&mut received).await;
    received
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ').map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(addr), Some(pid)) = (args.first(), args.get(1).and_then(|p| p.parse().ok())) else {
        eprintln!("usage: service_memory <host:port> <pid> [rounds] [runs per round] [clients]");
        return std::process::ExitCode::FAILURE;
    };
    let number =
        |i: usize, default: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(default);
    let (rounds, per_round, clients) = (number(2, 10), number(3, 1000), number(4, 16));
    let salt = u64::from(std::process::id()) << 16;
    let addr: Arc<str> = Arc::from(addr.as_str());
    println!("round  runs   rss_mib  live_channels  executing  runs/s");
    println!("    0      0  {:8.1}", rss_kib(pid) as f64 / 1024.0);
    let failed = Arc::new(AtomicUsize::new(0));
    for round in 1..=rounds {
        let next = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (addr, next, failed) = (addr.clone(), next.clone(), failed.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= per_round {
                        return;
                    }
                    let n = (round - 1) * per_round + i;
                    if !matches!(run(&addr, n, salt).await, Ok(true)) {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for task in tasks {
            let _ = task.await;
        }
        let rate = per_round as f64 / started.elapsed().as_secs_f64();
        // Let the process settle (allocator, finished tasks) before reading.
        tokio::time::sleep(Duration::from_millis(500)).await;
        println!(
            "{round:5}  {:5}  {:8.1}  {:>13}  {:>9}  {rate:6.0}",
            round * per_round,
            rss_kib(pid) as f64 / 1024.0,
            gauge(&addr, "agwire_live_channels").await,
            gauge(&addr, "agwire_runs_executing").await,
        );
    }
    let failed = failed.load(Ordering::Relaxed);
    if failed > 0 {
        eprintln!("{failed} runs did not end with RUN_FINISHED");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
