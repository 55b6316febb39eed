//! Runs the same workloads through agwire, the official TypeScript SDK (node)
//! and the official Python SDK in one run, and prints events/s, MB/s and the
//! ratios. `bench/run.sh` installs the peers and calls this.
//!
//! Usage: sidebyside [--python PATH] [--text-events N] [--mixed-turns N] [--node-client-limit N]
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use agwire_bench::{mixed_run, text_stream};
use agwire_codec::proto::{FrameDecoder, encode_frame};
use agwire_codec::sse::{SseDecoder, SseEncoder};
use agwire_core::Event;
use agwire_core::pipeline::Pipeline;
use serde_json::Value;

#[derive(Clone, Copy, Default)]
struct Rate {
    events: f64,
    bytes: f64,
    seconds: f64,
}

impl Rate {
    fn eps(&self) -> f64 {
        self.events / self.seconds
    }
    fn mbps(&self) -> f64 {
        self.bytes / self.seconds / 1e6
    }
    fn from_json(v: &Value) -> Option<Rate> {
        Some(Rate {
            events: v["events"].as_f64()?,
            bytes: v["bytes"].as_f64()?,
            seconds: v["seconds"].as_f64()?,
        })
    }
}

/// Best of `runs` timings of `f` (after one warm-up), which returns (events, bytes).
fn measure(runs: usize, mut f: impl FnMut() -> (usize, usize)) -> Rate {
    f();
    let mut best = Rate::default();
    for _ in 0..runs {
        let start = Instant::now();
        let (events, bytes) = f();
        let seconds = start.elapsed().as_secs_f64();
        if best.seconds == 0.0 || seconds < best.seconds {
            #[allow(clippy::cast_precision_loss)]
            {
                best = Rate {
                    events: events as f64,
                    bytes: bytes as f64,
                    seconds,
                };
            }
        }
    }
    best
}

struct Agwire {
    sse_encode: Rate,
    serde_floor: Rate,
    proto_encode: Rate,
    proto_decode: Rate,
    client: Rate,
}

fn run_agwire(events: &[Event], sse: &[u8], proto: &[u8], runs: usize) -> Agwire {
    let enc = SseEncoder::new();
    let mut buf = Vec::with_capacity(sse.len() + 1024);
    let sse_encode = measure(runs, || {
        buf.clear();
        for e in events {
            enc.encode(e, &mut buf);
        }
        (events.len(), buf.len())
    });
    let serde_floor = measure(runs, || {
        buf.clear();
        for e in events {
            serde_json::to_writer(&mut buf, e).unwrap();
        }
        (events.len(), buf.len())
    });
    let mut pbuf = Vec::with_capacity(proto.len() + 1024);
    let proto_encode = measure(runs, || {
        pbuf.clear();
        for e in events {
            encode_frame(e, &mut pbuf).unwrap();
        }
        (events.len(), pbuf.len())
    });
    let proto_decode = measure(runs, || {
        let mut d = FrameDecoder::new();
        let mut out = Vec::with_capacity(events.len());
        d.push(proto, &mut out).unwrap();
        d.finish().unwrap();
        (out.len(), proto.len())
    });
    let client = measure(runs, || {
        let mut frames = SseDecoder::new();
        let mut pipeline = Pipeline::new("bench-thread", Vec::new(), serde_json::json!({}));
        let mut batch = Vec::new();
        let mut n = 0;
        for chunk in sse.chunks(65536) {
            frames.push(chunk, &mut batch).unwrap();
            for f in batch.drain(..) {
                n += pipeline.push_json(&f.data).unwrap().len();
            }
        }
        frames.finish(&mut batch).unwrap();
        for f in batch.drain(..) {
            n += pipeline.push_json(&f.data).unwrap().len();
        }
        (n, sse.len())
    });
    Agwire {
        sse_encode,
        serde_floor,
        proto_encode,
        proto_decode,
        client,
    }
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn run_json(cmd: &mut Command) -> Option<Value> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        eprintln!("{:?} failed: {}", cmd, String::from_utf8_lossy(&out.stderr));
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn ratio(a: f64, b: Option<f64>) -> String {
    b.map_or("—".into(), |b| format!("{:.1}×", a / b))
}

fn row(name: &str, ours: Rate, node: Option<Rate>, python: Option<Rate>) {
    let fmt = |r: Option<Rate>| {
        r.map_or("—".to_owned(), |r| {
            format!("{:>12.0} ev/s {:>8.1} MB/s", r.eps(), r.mbps())
        })
    };
    println!(
        "| {name:<30} | {} | {} | {} | {:>7} | {:>7} |",
        fmt(Some(ours)),
        fmt(node),
        fmt(python),
        ratio(ours.eps(), node.map(|n| n.eps())),
        ratio(ours.eps(), python.map(|p| p.eps())),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let text_events: usize = arg(&args, "--text-events").map_or(1_000_000, |v| v.parse().unwrap());
    let mixed_turns: usize = arg(&args, "--mixed-turns").map_or(20, |v| v.parse().unwrap());
    let node_limit: usize =
        arg(&args, "--node-client-limit").map_or(20_000, |v| v.parse().unwrap());
    let python = arg(&args, "--python");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tmp = std::env::temp_dir().join("agwire-bench");
    std::fs::create_dir_all(&tmp).unwrap();

    for (name, events) in [
        (
            format!("(a) {text_events} TEXT_MESSAGE_CONTENT"),
            text_stream(text_events),
        ),
        (
            format!("(b) mixed run, {mixed_turns} turns"),
            mixed_run(mixed_turns),
        ),
    ] {
        let workload = tmp.join("workload.json");
        std::fs::write(&workload, serde_json::to_vec(&events).unwrap()).unwrap();
        let mut sse = Vec::new();
        let mut proto = Vec::new();
        for e in &events {
            SseEncoder::new().encode(e, &mut sse);
            encode_frame(e, &mut proto).unwrap();
        }
        let (sse_file, proto_file) = (tmp.join("body.sse"), tmp.join("body.proto"));
        std::fs::write(&sse_file, &sse).unwrap();
        std::fs::write(&proto_file, &proto).unwrap();
        let runs = if events.len() > 100_000 { 3 } else { 20 };
        let ours = run_agwire(&events, &sse, &proto, runs);
        let node = run_json(
            Command::new("node")
                .arg(root.join("node/bench.mjs"))
                .args([&workload, &sse_file, &proto_file])
                .arg(node_limit.to_string()),
        );
        let py = python.as_ref().and_then(|p| {
            run_json(
                Command::new(p)
                    .arg(root.join("python/bench.py"))
                    .arg(&workload),
            )
        });
        let n = |k: &str| node.as_ref().and_then(|v| Rate::from_json(&v[k]));
        let p = |k: &str| py.as_ref().and_then(|v| Rate::from_json(&v[k]));
        println!(
            "\n### {name}: {} events, {:.1} MB as SSE, {:.1} MB as protobuf\n",
            events.len(),
            sse.len() as f64 / 1e6,
            proto.len() as f64 / 1e6
        );
        println!(
            "| measurement | agwire | @ag-ui (node) | ag-ui-protocol (python) | vs node | vs python |"
        );
        println!("|---|---|---|---|---|---|");
        row(
            "SSE encode",
            ours.sse_encode,
            n("sse_encode"),
            p("sse_encode"),
        );
        row(
            "serde_json::to_writer (floor)",
            ours.serde_floor,
            None,
            None,
        );
        row(
            "protobuf encode (framed)",
            ours.proto_encode,
            n("proto_encode"),
            None,
        );
        row(
            "protobuf decode",
            ours.proto_decode,
            n("proto_decode"),
            None,
        );
        row(
            "client: SSE→verify→apply",
            ours.client,
            n("client_decode_verify_apply"),
            None,
        );
        println!(
            "\nSSE encode vs serde_json floor: {:.2}× the floor's time; node client measured on its first {} events (its apply copies the message list per event).",
            ours.serde_floor.eps() / ours.sse_encode.eps(),
            n("client_decode_verify_apply").map_or(0.0, |r| r.events)
        );
    }
    let _ = Path::new(&tmp);
}
