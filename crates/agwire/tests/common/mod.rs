//! `agwire serve` as a child process, and what the tests ask of it: shared
//! by the single-process tests (`serve.rs`) and the replica tests
//! (`replicas.rs`).
#![allow(dead_code, reason = "each test file uses some of these")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agwire_client::core::pipeline::Pipeline;
use agwire_client::core::{DecodeMode, Event, RunAgentInput};
use serde_json::{Value, json};

pub(crate) struct Serve {
    pub(crate) child: Child,
    pub(crate) base: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn data_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agwire-{name}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `agwire serve` on a free loopback port; returns once it listens.
pub(crate) fn serve(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
    serve_logging_to(dir, args, env, Stdio::inherit())
}

/// [`serve`] with its log lines (stderr) sent to `stderr`.
pub(crate) fn serve_logging_to(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stderr: Stdio,
) -> Serve {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agwire"));
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .args(args)
        .env_remove("AGWIRE_JWT_SECRET")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(stderr);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let line = first_line(&mut child, Duration::from_secs(60));
    let base = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();
    Serve { child, base }
}

/// The first line `child` prints on its stdout, read on a thread of its own
/// so that a child that never prints fails the test after `bound` (killed)
/// instead of hanging it.
pub(crate) fn first_line(child: &mut Child, bound: Duration) -> String {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line).map(|_| line);
        let _ = tx.send(read);
    });
    match rx.recv_timeout(bound) {
        Ok(read) => read.unwrap(),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("agwire serve printed nothing within {bound:?}");
        }
    }
}

/// Waits for `child` to exit, at most `bound` (then kills it and fails).
pub(crate) fn wait_exit(child: &mut Child, bound: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{:?} did not exit within {bound:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `command` to its end, at most `bound` (then kills it and fails):
/// what `Command::output` does, for a program that might never exit.
pub(crate) fn output_within(command: &mut Command, bound: Duration) -> std::process::Output {
    use std::io::Read;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let status = wait_exit(&mut child, bound);
    std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// A random generator for `test`, seeded from `AGWIRE_TEST_SEED` or afresh;
/// the seed is printed, so a failure can be repeated.
pub(crate) fn seeded_rng(test: &str) -> rand::rngs::StdRng {
    use rand::SeedableRng;
    let seed = std::env::var("AGWIRE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{test}: random choices seeded with {seed} (AGWIRE_TEST_SEED={seed} repeats them)");
    rand::rngs::StdRng::seed_from_u64(seed)
}

pub(crate) fn body(thread: &str, run_id: &str, text: &str) -> Value {
    json!({
        "threadId": thread, "runId": run_id,
        "messages": [{"id": format!("{run_id}-u"), "role": "user", "content": text}],
        "forwardedProps": {"runtime_mode": "chat"}
    })
}

pub(crate) async fn post(client: &reqwest::Client, base: &str, body: &Value) -> u16 {
    client
        .post(format!("{base}/api/v1/agent/runs"))
        .json(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

pub(crate) async fn get(client: &reqwest::Client, base: &str, path: &str) -> Value {
    client
        .get(format!("{base}{path}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The run's whole log, checked: numbered 1..n, one terminal event, last,
/// and valid for the official rules.
pub(crate) async fn checked_log(
    client: &reqwest::Client,
    base: &str,
    thread: &str,
    run: &str,
) -> Vec<Event> {
    let response = client
        .get(format!("{base}/api/v1/agent/runs/{run}/events"))
        .send()
        .await
        .unwrap();
    // A finished run's log ends: bounded, so one that never does fails.
    let bytes = tokio::time::timeout(Duration::from_secs(120), response.bytes())
        .await
        .unwrap_or_else(|_| panic!("{run}: its log did not end within 120 s"))
        .unwrap();
    let mut frames = Vec::new();
    let mut decoder = agwire_codec::sse::SseDecoder::new();
    decoder.push(&bytes, &mut frames).unwrap();
    decoder.finish(&mut frames).unwrap();
    let ids: Vec<u64> = frames
        .iter()
        .map(|f| f.id.as_deref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids, (1..=frames.len() as u64).collect::<Vec<_>>(), "{run}");
    let events: Vec<Event> = frames
        .iter()
        .map(|f| {
            agwire_codec::sse::decode_frame(f, DecodeMode::Lenient)
                .unwrap()
                .value
        })
        .collect();
    let terminals = events
        .iter()
        .filter(|e| matches!(e, Event::RunFinished(_) | Event::RunError(_)))
        .count();
    assert_eq!(terminals, 1, "{run}: {events:?}");
    assert!(
        matches!(events.first(), Some(Event::RunStarted(_))),
        "{run}: a log starts with RUN_STARTED: {events:?}"
    );
    assert!(
        matches!(
            events.last(),
            Some(Event::RunFinished(_) | Event::RunError(_))
        ),
        "{run}: a log ends with its terminal event: {events:?}"
    );
    let input: RunAgentInput = serde_json::from_value(body(thread, run, "x")).unwrap();
    let mut pipeline = Pipeline::for_input(&input);
    for event in &events {
        pipeline
            .push(event.clone())
            .unwrap_or_else(|e| panic!("{run}: {e}"));
    }
    events
}

pub(crate) async fn wait_final(client: &reqwest::Client, base: &str, run: &str) -> Value {
    for _ in 0..2000 {
        let status = get(client, base, &format!("/api/v1/agent/runs/{run}")).await;
        if !["queued", "running"].contains(&status["status"].as_str().unwrap()) {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{run} never ended");
}

/// What a fake provider saw of each request: its body and its
/// `traceparent`.
pub(crate) type Seen = std::sync::Arc<std::sync::Mutex<Vec<(Value, Option<String>)>>>;

/// Where a fake provider holds a router call for a user message saying
/// `hold`: it says the call arrived, then waits to be released.
#[derive(Default)]
pub(crate) struct Hold {
    /// Notified when a held call arrives (the run is executing).
    pub(crate) arrived: tokio::sync::Notify,
    /// Notified to let the held call answer.
    pub(crate) release: tokio::sync::Notify,
}

/// A fake OpenAI-compatible provider: routes to the calendar agent, then
/// calls `get_current_time`, then answers with what the tool said; every
/// request is kept. With `hold`, see [`Hold`].
pub(crate) async fn fake_provider(hold: Option<std::sync::Arc<Hold>>) -> (String, Seen) {
    use axum::body::{Body, Bytes};
    use axum::http::HeaderMap;
    let seen = Seen::default();
    let record = seen.clone();
    let handler = move |headers: HeaderMap, body: Bytes| {
        let record = record.clone();
        let hold = hold.clone();
        async move {
            let request: Value = serde_json::from_slice(&body).unwrap();
            let traceparent = headers
                .get("traceparent")
                .map(|v| v.to_str().unwrap().to_owned());
            record.lock().unwrap().push((request.clone(), traceparent));
            let messages = request["messages"].as_array().unwrap();
            let routing = request.get("response_format").is_some();
            if let Some(hold) = hold
                && routing
                && messages
                    .iter()
                    .any(|m| m["content"].to_string().contains("hold"))
            {
                hold.arrived.notify_one();
                hold.release.notified().await;
            }
            let chunk = |delta: Value, finish: Value| {
                format!(
                    "data: {}\n\n",
                    json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                )
            };
            let last = messages.last().unwrap();
            let text = if routing {
                chunk(
                    json!({"content": "{\"agent\": \"calendar\"}"}),
                    json!("stop"),
                )
            } else if last["role"] == "tool" {
                let now: Value = serde_json::from_str(last["content"].as_str().unwrap()).unwrap();
                chunk(
                    json!({"content": format!("It is {} where you are.", now["now"].as_str().unwrap())}),
                    Value::Null,
                ) + &chunk(json!({}), json!("stop"))
            } else {
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_current_time", "arguments": ""}}]}),
                    Value::Null,
                ) + &chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
                    Value::Null,
                ) + &chunk(json!({}), json!("tool_calls"))
            };
            let text = text
                + "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":8,\"total_tokens\":28}}\n\ndata: [DONE]\n\n";
            axum::response::Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(text))
                .unwrap()
        }
    };
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), seen)
}

/// Polls `condition` every 20 ms until it holds; fails after `bound`.
pub(crate) async fn until<F: std::future::Future<Output = bool>>(
    what: &str,
    bound: Duration,
    mut condition: impl FnMut() -> F,
) {
    let deadline = std::time::Instant::now() + bound;
    while !condition().await {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
