//! Many concurrent idle event streams against one `agwire serve`
//! (`bench/streams.sh` drives it; one JSON line on stdout per process).
//!
//! Modes:
//! - `create --addr A --count N [--src IP]`: posts N runs (a new thread
//!   each, `Accept: application/json`, each must answer 202) and prints
//!   their run ids, one a line.
//! - `open --addr A --kind events|post --count N [--runs FILE] [--src IP]
//!   [--pid SERVER_PID --warmup W] [--hold SECS] [--stop FILE]
//!   [--samples FILE]`: opens N streams (`events`: `GET
//!   /api/v1/agent/runs/{id}/events` over the run ids in FILE, round robin;
//!   `post`: a streaming `POST /api/v1/agent/runs` each on its own thread),
//!   at most 256 connecting at once, every socket bound to the source
//!   address IP (so several processes can each use a loopback address's
//!   ports). A stream is open once its response head (200) and its first
//!   SSE event arrived. With `--pid`, W warm-up streams are opened and
//!   closed first, and the server's VmRSS is read before and after the N.
//!   Then every stream is held, everything on it read, and each `:
//!   keep-alive` comment's lateness recorded: the time since the stream's
//!   previous chunk minus the 15 s period. Holding ends after SECS or once
//!   FILE exists. Writes `opened <n> <failed>` to stderr once opening is
//!   done, and the raw lateness samples (ms, one a line) to `--samples`.
//! - `probe --addr A --secs S [--every-ms 100] [--src IP]`: posts a new run
//!   (`Accept: application/json`, 202) every 100 ms on a new connection and
//!   reports connect-to-status-line latency p50/p99/max.
//!
//! Every failure (connect error, non-200/202 answer, a stream that ended or
//! stalled before its first event, a stream that ended while held) is
//! counted by reason in the output, never dropped.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

/// The server's keep-alive period on idle SSE streams.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Most streams connecting (not yet open) at once.
const CONNECTING: usize = 256;
/// How long a stream may take to open (head and first event).
const OPEN_TIMEOUT: Duration = Duration::from_secs(60);

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn num<T: std::str::FromStr>(name: &str, default: T) -> T {
    arg(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
    })
}

fn rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Failures by reason.
#[derive(Default)]
struct Failures(Mutex<BTreeMap<String, usize>>);

impl Failures {
    fn add(&self, reason: impl Into<String>) {
        *self.0.lock().unwrap().entry(reason.into()).or_default() += 1;
    }
    fn total(&self) -> usize {
        self.0.lock().unwrap().values().sum()
    }
    fn json(&self) -> String {
        let map = self.0.lock().unwrap();
        let items: Vec<String> = map
            .iter()
            .map(|(k, v)| format!("{}:{v}", serde_json::Value::from(k.as_str())))
            .collect();
        format!("{{{}}}", items.join(","))
    }
}

/// p50, p99, max of `values` (sorted here), or zeros.
fn percentiles(values: &mut [f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    values.sort_by(f64::total_cmp);
    let at =
        |q: f64| values[((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1];
    (at(0.50), at(0.99), values[values.len() - 1])
}

async fn connect(addr: SocketAddr, src: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    if let Some(src) = src {
        socket.bind(SocketAddr::new(src, 0))?;
    }
    socket.connect(addr).await
}

/// A thread id (a UUID) and run id unique to this process and `n`.
fn ids(tag: u16, n: usize) -> (String, String) {
    let pid = std::process::id();
    (
        format!("{pid:08x}-{tag:04x}-4000-a000-{n:012x}"),
        format!("flood-{pid}-{tag}-{n}"),
    )
}

fn post_request(addr: SocketAddr, tag: u16, n: usize, accept: &str) -> (String, String) {
    let (thread, run) = ids(tag, n);
    let body = format!(
        r#"{{"threadId":"{thread}","runId":"{run}","messages":[{{"id":"u","role":"user","content":"hello"}}],"forwardedProps":{{"runtime_mode":"chat"}}}}"#
    );
    let request = format!(
        "POST /api/v1/agent/runs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: {accept}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    (request, run)
}

fn find(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Sends `request` and reads the response head; the status code and what
/// of the body came with the head.
async fn head(socket: &mut TcpStream, request: &str) -> Result<(u16, Vec<u8>), String> {
    socket
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {:?}", e.kind()))?;
    let mut seen = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        let n = socket
            .read(&mut buf)
            .await
            .map_err(|e| format!("read head: {:?}", e.kind()))?;
        if n == 0 {
            return Err("closed before head".into());
        }
        seen.extend_from_slice(&buf[..n]);
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let status = std::str::from_utf8(seen.get(9..12).unwrap_or_default())
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            return Ok((status, seen.split_off(end + 4)));
        }
        if seen.len() > 64 * 1024 {
            return Err("head too large".into());
        }
    }
}

/// What a held stream shares with the process.
#[derive(Default)]
struct Held {
    failures: Failures,
    /// Lateness of every keep-alive comment, ms.
    lateness: Mutex<Vec<f64>>,
    keepalives: AtomicU64,
    streams_with_keepalive: AtomicUsize,
    /// Chunks other than keep-alives read after the stream opened.
    other_chunks: AtomicU64,
    /// Held streams that ended (each also counted in `failures`).
    ended: AtomicUsize,
}

enum Kind {
    Events(Arc<Vec<String>>),
    Post,
}

/// Opens one stream: connected, head 200, first SSE event read.
async fn open_one(
    addr: SocketAddr,
    src: Option<IpAddr>,
    kind: Arc<Kind>,
    n: usize,
) -> Result<(TcpStream, Instant), String> {
    let mut socket = connect(addr, src)
        .await
        .map_err(|e| format!("connect: {:?}", e.kind()))?;
    let request = match &*kind {
        Kind::Events(runs) => {
            let run = &runs[n % runs.len()];
            format!(
                "GET /api/v1/agent/runs/{run}/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
            )
        }
        Kind::Post => post_request(addr, 1, n, "text/event-stream").0,
    };
    let (status, mut body) = head(&mut socket, &request).await?;
    if status != 200 {
        return Err(format!("status {status}"));
    }
    let mut buf = [0u8; 2048];
    while !find(&body, b"data:") {
        let n = socket
            .read(&mut buf)
            .await
            .map_err(|e| format!("read first event: {:?}", e.kind()))?;
        if n == 0 {
            return Err("closed before first event".into());
        }
        body.extend_from_slice(&buf[..n]);
    }
    if find(&body, b"RUN_FINISHED") || find(&body, b"RUN_ERROR") {
        return Err("run ended while opening".into());
    }
    Ok((socket, Instant::now()))
}

/// Reads a held stream until it ends (which is a failure: nothing should end).
async fn hold(socket: TcpStream, last: Instant, held: Arc<Held>) {
    let reason = read_held(socket, last, &held).await;
    held.ended.fetch_add(1, Ordering::Relaxed);
    held.failures.add(reason);
}

/// Reads until the stream ends; why it ended.
async fn read_held(mut socket: TcpStream, mut last: Instant, held: &Held) -> String {
    const CARRY: usize = 11;
    let mut buf = [0u8; 1024];
    let mut carry = 0;
    let mut first = true;
    loop {
        let n = match socket.read(&mut buf[carry..]).await {
            Ok(0) => return "closed while held".into(),
            Ok(n) => n,
            Err(e) => return format!("read while held: {:?}", e.kind()),
        };
        let now = Instant::now();
        let data = &buf[..carry + n];
        if find(data, b": keep-alive") {
            let late = now.duration_since(last).as_secs_f64() - KEEP_ALIVE.as_secs_f64();
            held.lateness.lock().unwrap().push(late * 1000.0);
            held.keepalives.fetch_add(1, Ordering::Relaxed);
            if first {
                first = false;
                held.streams_with_keepalive.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            held.other_chunks.fetch_add(1, Ordering::Relaxed);
        }
        if find(data, b"RUN_FINISHED") || find(data, b"RUN_ERROR") {
            return "run ended while held".into();
        }
        if find(data, b"\r\n0\r\n\r\n") {
            return "body ended while held".into();
        }
        last = now;
        let len = carry + n;
        carry = len.min(CARRY);
        buf.copy_within(len - carry..len, 0);
    }
}

/// Opens `count` streams (numbered from `first`), at most 256 connecting at
/// once; open failures are counted in `failures`.
async fn open_many(
    addr: SocketAddr,
    src: Option<IpAddr>,
    kind: &Arc<Kind>,
    first: usize,
    count: usize,
    failures: &Failures,
) -> Vec<(TcpStream, Instant)> {
    let mut out = Vec::with_capacity(count);
    let mut pending = JoinSet::new();
    let mut started = 0;
    while started < count || !pending.is_empty() {
        while started < count && pending.len() < CONNECTING {
            let kind = kind.clone();
            let n = first + started;
            pending.spawn(async move {
                tokio::time::timeout(OPEN_TIMEOUT, open_one(addr, src, kind, n))
                    .await
                    .unwrap_or_else(|_| Err("open timed out".into()))
            });
            started += 1;
        }
        match pending.join_next().await {
            Some(Ok(Ok(stream))) => out.push(stream),
            Some(Ok(Err(reason))) => failures.add(format!("open: {reason}")),
            Some(Err(e)) => failures.add(format!("open task: {e}")),
            None => {}
        }
    }
    out
}

async fn open_mode(addr: SocketAddr, src: Option<IpAddr>) -> bool {
    let count: usize = num("--count", 10_000);
    let kind = match arg("--kind").as_deref() {
        Some("post") => Kind::Post,
        Some("events") | None => {
            let file = arg("--runs").expect("--runs FILE for --kind events");
            let runs: Vec<String> = std::fs::read_to_string(&file)
                .expect("runs file")
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect();
            assert!(!runs.is_empty(), "no run ids in {file}");
            Kind::Events(Arc::new(runs))
        }
        Some(other) => panic!("--kind {other}: events or post"),
    };
    let kind_name = if matches!(kind, Kind::Post) {
        "post"
    } else {
        "events"
    };
    let kind = Arc::new(kind);
    let held = Arc::new(Held::default());
    let pid = arg("--pid");
    let warmup: usize = num("--warmup", 100);

    let mut rss = None;
    if let Some(pid) = &pid {
        let warm = open_many(addr, src, &kind, count, warmup, &held.failures).await;
        drop(warm);
        tokio::time::sleep(Duration::from_millis(500)).await;
        rss = Some(rss_kib(pid));
    }
    let started = Instant::now();
    let streams = open_many(addr, src, &kind, 0, count, &held.failures).await;
    let open_secs = started.elapsed().as_secs_f64();
    let opened = streams.len();
    let rss = match (&pid, rss) {
        (Some(pid), Some(before)) => {
            tokio::time::sleep(Duration::from_millis(1000)).await;
            Some((before, rss_kib(pid)))
        }
        _ => None,
    };
    eprintln!("opened {opened} {}", held.failures.total());
    for (socket, last) in streams {
        tokio::spawn(hold(socket, last, held.clone()));
    }

    let hold_secs: f64 = num("--hold", 0.0);
    let stop = arg("--stop");
    let holding = Instant::now();
    loop {
        if stop
            .as_ref()
            .is_some_and(|f| std::path::Path::new(f).exists())
        {
            break;
        }
        if stop.is_none() && holding.elapsed().as_secs_f64() >= hold_secs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let held_secs = holding.elapsed().as_secs_f64();

    let mut lateness = std::mem::take(&mut *held.lateness.lock().unwrap());
    if let Some(file) = arg("--samples") {
        let text: String = lateness.iter().map(|v| format!("{v:.3}\n")).collect();
        std::fs::write(&file, text).expect("samples file");
    }
    let (p50, p99, max) = percentiles(&mut lateness);
    let min = lateness.first().copied().unwrap_or(0.0);
    let rss_json = rss.map_or(String::new(), |(before, after)| {
        let per = after.saturating_sub(before) as f64 / opened.max(1) as f64;
        format!(r#","rss_before_kib":{before},"rss_after_kib":{after},"kib_per_stream":{per:.2}"#)
    });
    let failed = held.failures.total();
    println!(
        r#"{{"mode":"open","kind":"{kind_name}","src":"{}","requested":{count},"opened":{opened},"open_secs":{open_secs:.2},"held_secs":{held_secs:.1},"still_open":{},"keepalives":{},"streams_with_keepalive":{},"other_chunks":{},"lateness_ms":{{"min":{min:.1},"p50":{p50:.1},"p99":{p99:.1},"max":{max:.1}}}{rss_json},"failed":{failed},"failures":{}}}"#,
        src.map_or("default".into(), |s| s.to_string()),
        opened - held.ended.load(Ordering::Relaxed),
        held.keepalives.load(Ordering::Relaxed),
        held.streams_with_keepalive.load(Ordering::Relaxed),
        held.other_chunks.load(Ordering::Relaxed),
        held.failures.json(),
    );
    failed == 0
}

/// One new run, `Accept: application/json`: connect to status line.
async fn probe_one(addr: SocketAddr, src: Option<IpAddr>, n: usize) -> Result<f64, String> {
    let started = Instant::now();
    let mut socket = connect(addr, src)
        .await
        .map_err(|e| format!("connect: {:?}", e.kind()))?;
    let (request, _) = post_request(addr, 2, n, "application/json");
    let (status, _) = head(&mut socket, &request).await?;
    if status != 202 {
        return Err(format!("status {status}"));
    }
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

async fn probe_mode(addr: SocketAddr, src: Option<IpAddr>) -> bool {
    let secs: f64 = num("--secs", 10.0);
    let every = Duration::from_millis(num("--every-ms", 100));
    let failures = Failures::default();
    let mut tasks = JoinSet::new();
    let mut tick = tokio::time::interval(every);
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed().as_secs_f64() < secs {
        tick.tick().await;
        tasks.spawn(tokio::time::timeout(
            Duration::from_secs(30),
            probe_one(addr, src, n),
        ));
        n += 1;
    }
    let mut latencies = Vec::with_capacity(n);
    while let Some(result) = tasks.join_next().await {
        match result {
            Ok(Ok(Ok(ms))) => latencies.push(ms),
            Ok(Ok(Err(reason))) => failures.add(reason),
            Ok(Err(_)) => failures.add("timed out (30 s)"),
            Err(e) => failures.add(format!("task: {e}")),
        }
    }
    let (p50, p99, max) = percentiles(&mut latencies);
    println!(
        r#"{{"mode":"probe","runs":{n},"accepted":{},"latency_ms":{{"p50":{p50:.2},"p99":{p99:.2},"max":{max:.2}}},"failed":{},"failures":{}}}"#,
        latencies.len(),
        failures.total(),
        failures.json()
    );
    failures.total() == 0
}

async fn create_mode(addr: SocketAddr, src: Option<IpAddr>) -> bool {
    let count: usize = num("--count", 100);
    for n in 0..count {
        let (request, run) = post_request(addr, 3, n, "application/json");
        let result = match connect(addr, src).await {
            Ok(mut socket) => head(&mut socket, &request).await,
            Err(e) => Err(format!("connect: {:?}", e.kind())),
        };
        match result {
            Ok((202, _)) => println!("{run}"),
            Ok((status, body)) => {
                eprintln!(
                    "create: status {status}: {}",
                    String::from_utf8_lossy(&body)
                );
                return false;
            }
            Err(reason) => {
                eprintln!("create: {reason}");
                return false;
            }
        }
    }
    true
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let addr: SocketAddr = arg("--addr")
        .expect("--addr host:port")
        .parse()
        .expect("--addr: ip:port");
    let src: Option<IpAddr> = arg("--src").map(|s| s.parse().expect("--src: an IP address"));
    let ok = match mode.as_str() {
        "open" => open_mode(addr, src).await,
        "probe" => probe_mode(addr, src).await,
        "create" => create_mode(addr, src).await,
        _ => {
            eprintln!("usage: stream_flood open|probe|create --addr IP:PORT [options]");
            false
        }
    };
    if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
