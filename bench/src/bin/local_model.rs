//! The local model's speed through agwire's own path (`LocalModel`, the
//! stream a run reads), for comparison with llama.cpp's `llama-bench` on
//! the same file and threads:
//!
//! `cargo run --release -p agwire-bench --bin local_model -- MODEL.gguf [THREADS]`
//!
//! Prints: prompt processing (a ~500-token prompt, time to the first
//! token), generation (128 tokens, free text), the same under a grammar
//! (JSON held to a schema), and the process's peak memory with four runs
//! generating at once.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use agwire_llm::local::{LocalConfig, LocalModel};
use agwire_llm::{ChatEvent, ChatMessage, ChatModel, ChatRequest};
use futures_util::StreamExt;
use serde_json::json;

/// Time to the first event and the generation rate after it.
async fn run(model: &LocalModel, request: ChatRequest) -> (f64, f64, u64, u64) {
    let started = Instant::now();
    let mut stream = model.stream(request).await.unwrap();
    let mut first = None;
    let mut usage = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            ChatEvent::Usage(u) => usage = Some(u),
            ChatEvent::Finish(_) => {}
            _ => {
                first.get_or_insert_with(|| started.elapsed());
            }
        }
    }
    let total = started.elapsed();
    let usage = usage.unwrap();
    let first = first.unwrap_or(total);
    let rate =
        usage.completion_tokens.saturating_sub(1) as f64 / (total - first).as_secs_f64().max(1e-9);
    (
        first.as_secs_f64() * 1000.0,
        rate,
        usage.prompt_tokens,
        usage.completion_tokens,
    )
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("MODEL.gguf");
    let threads: usize = args.next().map_or(2, |t| t.parse().unwrap());
    let mut config = LocalConfig::new(&path);
    config.threads = threads;
    config.parallel = 1;
    let model = LocalModel::load(config).unwrap();
    println!("model {path}, {threads} threads");

    // ~500 prompt tokens: prompt processing and first-token latency.
    let long: String = (0..37)
        .map(|i| format!("Note {i}: the meeting moved to room {}. ", i * 7 % 13))
        .collect();
    // Each prompt starts differently: nothing of it is in the slot's cache.
    let prompt_request = |i: usize| ChatRequest {
        messages: vec![ChatMessage::user(format!(
            "Batch {i}. {long}\nSummarise the notes."
        ))],
        max_tokens: Some(1),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let mut firsts = Vec::new();
    let mut prompt_tokens = 0;
    for i in 0..5 {
        let (first, _, p, _) = run(&model, prompt_request(i)).await;
        firsts.push(first);
        prompt_tokens = p;
    }
    firsts.sort_by(f64::total_cmp);
    let first = firsts[firsts.len() / 2];
    println!(
        "prompt: {prompt_tokens} tokens, first token {first:.1} ms (median of 5), {:.1} tokens/s",
        prompt_tokens as f64 / (first / 1000.0)
    );
    // The same prompt again: the slot computes only its last token.
    let (again, _, _, _) = run(&model, prompt_request(4)).await;
    println!("the same prompt again (prefix cached): first token {again:.1} ms");

    // Generation: free text, and under a grammar that cannot end early.
    let free = ChatRequest {
        messages: vec![ChatMessage::user(
            "Write a long story about a lighthouse keeper.",
        )],
        max_tokens: Some(128),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let constrained = ChatRequest {
        messages: vec![ChatMessage::user("List numbers.")],
        response_schema: Some(
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 1000}),
        ),
        max_tokens: Some(128),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let free_again = ChatRequest {
        messages: vec![ChatMessage::user("List numbers.")],
        max_tokens: Some(128),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    for (label, request) in [
        ("free text", free),
        ("free text, same prompt as grammar", free_again),
        ("under a JSON grammar", constrained),
    ] {
        let mut rates = Vec::new();
        let mut tokens = 0;
        for _ in 0..3 {
            let (_, rate, _, n) = run(&model, request.clone()).await;
            rates.push(rate);
            tokens = n;
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "generation, {label}: {:.1} tokens/s ({tokens} tokens, median of 3)",
            rates[1]
        );
    }
    drop(model);

    // Memory: one model, four runs at once.
    let mut config = LocalConfig::new(&path);
    config.threads = 1;
    config.parallel = 4;
    let model = std::sync::Arc::new(LocalModel::load(config).unwrap());
    let runs: Vec<_> = (0..4)
        .map(|i| {
            let model = model.clone();
            tokio::spawn(async move {
                let request = ChatRequest {
                    messages: vec![ChatMessage::user(format!("Tell story number {i}."))],
                    max_tokens: Some(64),
                    ..ChatRequest::default()
                };
                run(&model, request).await
            })
        })
        .collect();
    for r in runs {
        r.await.unwrap();
    }
    println!("peak RSS with four runs at once: {:.0} MiB", peak_rss_mib());
}
