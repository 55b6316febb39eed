//! Many chats at once on one local model: agwire's engine (in this
//! process) or a running llama.cpp `llama-server`, the same workload on
//! each.
//!
//! ```text
//! local_batch agwire MODEL.gguf N [THREADS] [ROUNDS]
//! local_batch server URL PID N [ROUNDS]
//! ```
//!
//! Each round sends N chat requests at once (a ~300-token prompt that
//! starts differently for each, so no prompt cache helps; greedy; at most
//! 128 tokens) and waits for all of them. Prints aggregate generated
//! tokens/s (median over rounds), time to first token p50/p99 over every
//! request, and the peak RSS of the process that runs the model (this one,
//! or the server's PID). Start one process (and one server) per N: peak
//! RSS is per process.
//!
//! For `agwire`, `parallel` is N and the context per call 4,096 tokens;
//! compare with `llama-server -m MODEL.gguf -t THREADS -np N -c 4096×N
//! -cb`.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agwire_llm::local::{LocalConfig, LocalModel};
use agwire_llm::{ChatEvent, ChatMessage, ChatModel, ChatRequest};
use futures_util::StreamExt;

const MAX_TOKENS: u32 = 128;

/// ~300 tokens; `i` makes its start unique.
fn prompt(round: usize, i: usize) -> String {
    let notes: String = (0..20)
        .map(|k| format!("Note {k}: the meeting moved to room {}. ", (k * 7 + i) % 13))
        .collect();
    format!(
        "Request {round}-{i}. {notes}\nNow write a long story about a lighthouse keeper who reads these notes."
    )
}

/// One request's time to first token and tokens generated.
struct Sample {
    first: Duration,
    tokens: u64,
    prompt_tokens: u64,
}

async fn agwire_call(model: Arc<LocalModel>, text: String) -> Sample {
    let started = Instant::now();
    let request = ChatRequest {
        messages: vec![ChatMessage::user(text)],
        max_tokens: Some(MAX_TOKENS),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let mut stream = model.stream(request).await.unwrap();
    let mut first = None;
    let mut usage = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            ChatEvent::TextDelta(t) if !t.is_empty() => {
                first.get_or_insert_with(|| started.elapsed());
            }
            ChatEvent::Usage(u) => usage = Some(u),
            _ => {}
        }
    }
    let usage = usage.unwrap();
    Sample {
        first: first.unwrap_or_else(|| started.elapsed()),
        tokens: usage.completion_tokens,
        prompt_tokens: usage.prompt_tokens,
    }
}

async fn server_call(client: reqwest::Client, url: String, text: String) -> Sample {
    let started = Instant::now();
    let body = serde_json::json!({
        "messages": [{"role": "user", "content": text}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let response = client
        .post(format!("{url}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let mut bytes = response.bytes_stream();
    let mut buffer = Vec::new();
    let mut first = None;
    let (mut tokens, mut prompt_tokens) = (0, 0);
    while let Some(chunk) = bytes.next().await {
        buffer.extend_from_slice(&chunk.unwrap());
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let Some(data) = line.strip_prefix(b"data: ") else {
                continue;
            };
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
                continue;
            };
            let content = value["choices"][0]["delta"]["content"].as_str();
            if content.is_some_and(|c| !c.is_empty()) {
                first.get_or_insert_with(|| started.elapsed());
            }
            if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
                tokens = usage["completion_tokens"].as_u64().unwrap_or(0);
                prompt_tokens = usage["prompt_tokens"].as_u64().unwrap_or(0);
            }
        }
    }
    Sample {
        first: first.unwrap_or_else(|| started.elapsed()),
        tokens,
        prompt_tokens,
    }
}

fn peak_rss_mib(pid: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "local_batch agwire MODEL.gguf N [THREADS] [ROUNDS] | local_batch server URL PID N [ROUNDS]";
    let mode = args.first().expect(usage).clone();
    let (n, rounds, pid): (usize, usize, String);
    let mut model = None;
    let mut server = None;
    match mode.as_str() {
        "agwire" => {
            n = args[2].parse().expect(usage);
            let threads: usize = args.get(3).map_or(2, |t| t.parse().unwrap());
            rounds = args.get(4).map_or(3, |r| r.parse().unwrap());
            let mut config = LocalConfig::new(&args[1]);
            config.parallel = n;
            config.threads = threads;
            config.context = 4096;
            model = Some(Arc::new(LocalModel::load(config).unwrap()));
            pid = "self".into();
            println!("agwire: {}, N={n}, {threads} threads", args[1]);
        }
        "server" => {
            server = Some(args[1].trim_end_matches('/').to_owned());
            pid = args[2].clone();
            n = args[3].parse().expect(usage);
            rounds = args.get(4).map_or(3, |r| r.parse().unwrap());
            println!("llama-server at {}, pid {pid}, N={n}", args[1]);
        }
        _ => panic!("{usage}"),
    }
    // A connection per request: llama-server closes idle keep-alive
    // connections, and a reused one that it closed fails the request.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    // A warm-up call: the first decode allocates.
    let warm = |i: usize| prompt(0, 100 + i);
    match (&model, &server) {
        (Some(model), _) => {
            agwire_call(model.clone(), warm(0)).await;
        }
        (_, Some(url)) => {
            server_call(client.clone(), url.clone(), warm(0)).await;
        }
        _ => unreachable!(),
    }
    let mut rates = Vec::new();
    let mut firsts = Vec::new();
    let (mut prompt_tokens, mut generated) = (0, 0);
    for round in 1..=rounds {
        let started = Instant::now();
        let calls: Vec<_> = (0..n)
            .map(|i| {
                let text = prompt(round, i);
                match (&model, &server) {
                    (Some(model), _) => tokio::spawn(agwire_call(model.clone(), text)),
                    (_, Some(url)) => tokio::spawn(server_call(client.clone(), url.clone(), text)),
                    _ => unreachable!(),
                }
            })
            .collect();
        let mut tokens = 0;
        for call in calls {
            let sample = call.await.unwrap();
            tokens += sample.tokens;
            prompt_tokens = sample.prompt_tokens;
            firsts.push(sample.first.as_secs_f64() * 1000.0);
        }
        let wall = started.elapsed().as_secs_f64();
        generated += tokens;
        rates.push(tokens as f64 / wall);
        println!("  round {round}: {tokens} tokens in {wall:.2} s");
    }
    rates.sort_by(f64::total_cmp);
    firsts.sort_by(f64::total_cmp);
    println!(
        "N={n}: {:.1} tokens/s aggregate (median of {rounds}), TTFT p50 {:.0} ms p99 {:.0} ms, peak RSS {:.0} MiB ({prompt_tokens} prompt tokens, {generated} generated)",
        rates[rates.len() / 2],
        percentile(&firsts, 50.0),
        percentile(&firsts, 99.0),
        peak_rss_mib(&pid),
    );
}
