//! Added latency per token, provider chunk → SSE frame: a fake
//! OpenAI-compatible provider writes one token every 5 ms and notes when;
//! `agwire serve`'s service (LLM pipeline, SQLite log, live fan-out) runs
//! against it on loopback; a client reads the run's SSE stream straight from
//! the POST and notes when each token's `TEXT_MESSAGE_CONTENT` arrives.
//!
//! Usage: `token_latency [runs (default 5)] [tokens per run (default 200)]`.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agwire_llm::{ChatModel, OpenAiCompatible, OpenAiConfig};
use agwire_service::brain::llm::LlmBrain;
use agwire_service::store::{PgStore, SqliteStore, Store};
use agwire_service::{BuiltinAgent, Service};
use axum::body::{Body, Bytes};
use axum::extract::State;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Sent = Arc<Mutex<Vec<Option<Instant>>>>;

#[derive(Clone)]
struct Fake {
    sent: Sent,
    tokens: usize,
}

async fn completions(State(fake): State<Fake>, body: Bytes) -> axum::response::Response {
    let routing = String::from_utf8_lossy(&body).contains("json_object");
    let tokens = fake.tokens;
    let stream = futures_util::stream::unfold(0usize, move |i| {
        let sent = fake.sent.clone();
        async move {
            let chunk = |delta: &str, finish: &str| {
                format!(
                    "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{delta}}},\"finish_reason\":{finish}}}]}}\n\n"
                )
            };
            if routing {
                return (i == 0).then(|| {
                    (
                        Ok::<_, std::io::Error>(Bytes::from(
                            chunk("\"{\\\"agent\\\":\\\"general\\\"}\"", "\"stop\"")
                                + "data: [DONE]\n\n",
                        )),
                        1,
                    )
                });
            }
            if i > tokens {
                return None;
            }
            if i == tokens {
                return Some((
                    Ok(Bytes::from(chunk("\"\"", "\"stop\"") + "data: [DONE]\n\n")),
                    i + 1,
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            sent.lock().unwrap()[i] = Some(Instant::now());
            Some((Ok(Bytes::from(chunk(&format!("\"t{i} \""), "null"))), i + 1))
        }
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let tokens: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);

    let sent: Sent = Arc::new(Mutex::new(vec![None; tokens]));
    let fake = Fake {
        sent: sent.clone(),
        tokens,
    };
    let provider = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let provider_addr = provider.local_addr().unwrap();
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(fake);
    // TCP_NODELAY as a provider's server has it: Nagle would hold a token
    // written right after another until the client's delayed ACK.
    let provider = axum::serve::ListenerExt::tap_io(provider, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(provider, app).await.unwrap() });

    let dir = std::env::temp_dir().join(format!("agwire-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // AGWIRE_DATABASE_URL: measure on PostgreSQL instead of SQLite.
    let store: Arc<dyn Store> = match std::env::var("AGWIRE_DATABASE_URL") {
        Ok(url) => Arc::new(PgStore::connect(&url).await.unwrap()),
        Err(_) => Arc::new(SqliteStore::open(&dir.join("agwire.db")).await.unwrap()),
    };
    let model: Arc<dyn ChatModel> = Arc::new(
        OpenAiCompatible::new(OpenAiConfig::new(format!("http://{provider_addr}/v1"), "m"))
            .unwrap(),
    );
    let service = Service::new(store, Arc::new(BuiltinAgent::default()))
        .with_brain(Arc::new(LlmBrain::new(model.clone(), model)));
    // The engine's dispatcher executes accepted runs.
    service.start().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = service.router();
    // The server `agwire serve` runs (its socket options: TCP_NODELAY).
    let server = service.clone();
    tokio::spawn(async move {
        server
            .serve(listener, router, std::future::pending())
            .await
            .unwrap();
    });

    let mut micros: Vec<u64> = Vec::new();
    for run in 0..runs {
        sent.lock().unwrap().iter_mut().for_each(|s| *s = None);
        let body = format!(
            r#"{{"threadId":"00000000-0000-4000-a000-{run:012}","runId":"lat-{run}","messages":[{{"id":"u","role":"user","content":"go"}}],"forwardedProps":{{"runtime_mode":"chat"}}}}"#
        );
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let request = format!(
            "POST /api/v1/agent/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut pending = String::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = stream.read(&mut chunk).await.unwrap();
            if n == 0 {
                break;
            }
            let now = Instant::now();
            pending.push_str(&String::from_utf8_lossy(&chunk[..n]));
            // Every complete `"delta":"t<i> "` seen in this read arrived now.
            while let Some(at) = pending.find("\"delta\":\"t") {
                let rest = &pending[at + 10..];
                let Some(end) = rest.find(' ') else { break };
                if let Ok(i) = rest[..end].parse::<usize>()
                    && let Some(Some(sent_at)) = sent.lock().unwrap().get(i)
                {
                    micros.push(now.duration_since(*sent_at).as_micros() as u64);
                }
                pending.drain(..at + 10 + end);
            }
        }
    }
    // No token at all: the runs were refused or failed (the stream says
    // why); a figure over nothing would be no figure.
    assert!(
        !micros.is_empty(),
        "no token reached the client in {runs} runs: the service refused or failed them"
    );
    micros.sort_unstable();
    let at = |q: f64| micros[((micros.len() - 1) as f64 * q) as usize];
    println!(
        "provider chunk -> SSE frame, {} tokens ({runs} runs x {tokens}): p50 {} us, p90 {} us, p99 {} us, max {} us",
        micros.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        micros[micros.len() - 1]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
