//! Run admission and lifecycle over real HTTP: the busy-thread policies,
//! cancel (queued, running, twice), the standard `/api/v1/agui` endpoint with
//! the official `HttpAgent` over several turns, `/metrics`, and the route
//! list `/openapi.json` describes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use crate::common;

use std::time::Duration;

use agwire_client::core::pipeline::Pipeline;
use agwire_client::core::{Event, RunAgentInput, RunFinishedOutcome};
use agwire_service::auth::{Auth, sign_jwt};
use agwire_service::run::MultitaskStrategy;
use agwire_service::{BuiltinAgent, Config};
use common::{body, events, get_json, history, outcome, post, said, start, status, wait_status};
use serde_json::{Value, json};

fn enqueue() -> Config {
    let mut config = Config::default();
    config.runs.busy_thread = MultitaskStrategy::Enqueue;
    config
}

fn slow(ms: u64) -> BuiltinAgent {
    BuiltinAgent::with_token_delay(Duration::from_millis(ms))
}

async fn cancel(addr: std::net::SocketAddr, run_id: &str) -> Value {
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/agent/runs/{run_id}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 202);
    response.json().await.unwrap()
}

/// The log is a valid AG-UI run for the official rules.
fn assert_valid_run(log: &[(u64, Event)], thread: &str, run_id: &str) {
    let input: RunAgentInput = serde_json::from_value(body(thread, run_id, "x")).unwrap();
    let mut pipeline = Pipeline::for_input(&input);
    for (_, event) in log {
        pipeline.push(event.clone()).unwrap();
    }
    let seqs: Vec<u64> = log.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_thread_is_409_by_default() {
    // Ten words at 100 ms: the thread is busy for a second.
    let server = start(&Config::default(), slow(100), Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post(
            addr,
            &body(&thread, "a", "one two three four five six seven"),
            None
        )
        .await
        .status()
        .as_u16(),
        202
    );
    let busy = post(addr, &body(&thread, "b", "again"), None).await;
    assert_eq!(busy.status().as_u16(), 409);
    let detail: Value = busy.json().await.unwrap();
    assert_eq!(
        detail,
        json!({"detail": "the thread already has an active run; wait for it or cancel it"})
    );
    // Refused means not stored.
    let missing = reqwest::get(format!("http://{addr}/api/v1/agent/runs/b"))
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    wait_status(addr, "a", "succeeded").await;
    // Free again once the run ended.
    assert_eq!(
        post(addr, &body(&thread, "b", "again"), None)
            .await
            .status()
            .as_u16(),
        202
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_wait_their_turn_and_a_queued_cancel_ends_at_once() {
    // `a` streams 23 words at 60 ms: b and c surely wait behind it.
    let server = start(&enqueue(), slow(60), Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    let first = "first turn here with enough words to keep the thread busy while two more turns arrive and one is cancelled";
    for (run, text) in [("a", first), ("b", "second"), ("c", "third")] {
        let response = post(addr, &body(&thread, run, text), None).await;
        assert_eq!(response.status().as_u16(), 202, "{run}");
    }
    assert_eq!(status(addr, "b").await["status"], "queued");
    assert_eq!(status(addr, "c").await["status"], "queued");

    // Cancelled before it started: it ends now, as a valid cancelled run.
    cancel(addr, "c").await;
    let c = status(addr, "c").await;
    assert_eq!(c["status"], "cancelled");
    assert_eq!(c["startedAt"], Value::Null);
    let log = events(addr, "c", None).await;
    assert_eq!(log.len(), 2, "{log:?}");
    assert_valid_run(&log, &thread, "c");
    assert_eq!(outcome(&log), Some(RunFinishedOutcome::Cancelled));
    // Idempotent.
    cancel(addr, "c").await;
    assert_eq!(events(addr, "c", None).await, log);

    // b's stream, opened while it waits, follows it to its end.
    let b_log = events(addr, "b", None).await;
    assert_valid_run(&b_log, &thread, "b");
    assert_eq!(outcome(&b_log), None);
    let (a, b) = (status(addr, "a").await, status(addr, "b").await);
    assert_eq!(
        (&a["status"], &b["status"]),
        (&json!("succeeded"), &json!("succeeded"))
    );
    assert!(
        b["startedAt"].as_i64() >= a["finishedAt"].as_i64(),
        "{a} {b}"
    );
    assert_eq!(status(addr, "c").await["status"], "cancelled");

    // The thread reads in the order turns ran; the cancelled one never ran.
    assert_eq!(
        history(addr, &thread).await,
        [
            ("user".into(), first.into()),
            ("assistant".into(), format!("You said: {first}")),
            ("user".into(), "second".into()),
            ("assistant".into(), "You said: second".into()),
        ]
    );
}

/// How long a waiting run may take to start once what it waits for ended:
/// half the dispatcher's sweep (every 5 s), which finds what no wake-up
/// told it of. Woken, a run starts within milliseconds.
const STARTS_WITHIN_MS: i64 = 2_500;

/// The runs (their status objects) executed one at a time, each starting
/// within [`STARTS_WITHIN_MS`] of the end of the one before; at least one
/// of them was accepted before that end, so it waited.
fn assert_each_started_when_the_one_before_ended(mut runs: Vec<Value>) {
    let at = |run: &Value, field: &str| {
        run[field]
            .as_i64()
            .unwrap_or_else(|| panic!("{field} of {run}"))
    };
    runs.sort_by_key(|run| at(run, "startedAt"));
    // Each run's wait after the end of the one before (ms), and whether it
    // was accepted before that end.
    let gaps: Vec<(i64, bool)> = runs
        .windows(2)
        .map(|pair| {
            let (before, next) = (&pair[0], &pair[1]);
            (
                at(next, "startedAt") - at(before, "finishedAt"),
                at(next, "createdAt") < at(before, "finishedAt"),
            )
        })
        .collect();
    for (gap, _) in &gaps {
        assert!(*gap >= 0, "two runs at once: {runs:?}");
        assert!(
            *gap < STARTS_WITHIN_MS,
            "a run started {gap} ms after the one before ended (found by the sweep, not \
             woken); every gap: {gaps:?}"
        );
    }
    let waited = gaps.iter().filter(|(_, waited)| *waited).count();
    assert!(waited > 0, "no run had to wait: {runs:?}");
}

/// The status objects of `runs`, each once it has succeeded.
async fn succeeded(addr: std::net::SocketAddr, runs: &[String]) -> Vec<Value> {
    let mut ended = Vec::new();
    for run in runs {
        ended.push(wait_status(addr, run, "succeeded").await);
    }
    ended
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_waiting_for_a_place_start_as_places_free() {
    // One place: eight runs posted at once (each streams five words at
    // 20 ms) execute one after another.
    let mut config = Config::default();
    config.runs.max_concurrent = 1;
    let server = start(&config, slow(20), Auth::none()).await;
    let addr = server.addr;
    let runs: Vec<String> = (0..8).map(|i| format!("place-{i}")).collect();
    let posted = futures_util::future::join_all(runs.iter().map(|run| async move {
        let thread = uuid::Uuid::new_v4().to_string();
        post(addr, &body(&thread, run, "one two three four five"), None)
            .await
            .status()
            .as_u16()
    }))
    .await;
    assert_eq!(posted, [202; 8]);
    assert_each_started_when_the_one_before_ended(succeeded(addr, &runs).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_start_as_the_run_before_them_ends() {
    let server = start(&enqueue(), slow(20), Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    let runs: Vec<String> = (0..6).map(|i| format!("turn-{i}")).collect();
    for run in &runs {
        let response = post(addr, &body(&thread, run, "one two three four five"), None).await;
        assert_eq!(response.status().as_u16(), 202, "{run}");
    }
    assert_each_started_when_the_one_before_ended(succeeded(addr, &runs).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_running_run_ends_it_cancelled_with_what_it_said() {
    let server = start(&Config::default(), slow(40), Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    // 78 words at 40 ms: about three seconds of answer for the cancel to
    // land in, however loaded the machine.
    let text = &"a b c d e f g h i j k l m n o p q r s t u v w x y z ".repeat(3);
    let text = text.trim_end();
    post(addr, &body(&thread, "long", text), None).await;
    // Once it has said something (seen on its stream), stop it.
    common::wait_for_text(addr, "long").await;
    let answer = cancel(addr, "long").await;
    assert_eq!(answer, json!({"runId": "long", "cancelRequested": true}));
    let log = events(addr, "long", None).await;
    assert_valid_run(&log, &thread, "long");
    assert_eq!(outcome(&log), Some(RunFinishedOutcome::Cancelled));
    let said = said(&log);
    assert!(!said.is_empty() && said.len() < "You said: ".len() + text.len());
    assert_eq!(status(addr, "long").await["status"], "cancelled");
    // Twice is fine and changes nothing.
    cancel(addr, "long").await;
    assert_eq!(status(addr, "long").await["status"], "cancelled");
    // The partial answer is in the thread.
    let turns = history(addr, &thread).await;
    assert_eq!(turns[1], ("assistant".into(), said));

    // Posted and cancelled back to back: the cancel wins wherever the run is.
    post(addr, &body(&thread, "quick", text), None).await;
    cancel(addr, "quick").await;
    let log = events(addr, "quick", None).await;
    assert_valid_run(&log, &thread, "quick");
    assert_eq!(outcome(&log), Some(RunFinishedOutcome::Cancelled));

    // Unknown runs are 404.
    let missing = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/agent/runs/nope/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agui_endpoint_serves_multi_turn_http_agent_sessions() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let thread = format!("conversation-{}", uuid::Uuid::new_v4());
    let spec = json!({
        "url": format!("http://{addr}/api/v1/agui"),
        "format": "sse",
        "threadId": thread,
        "runs": [
            {"messages": [{"id": "u1", "role": "user", "content": "first question"}]},
            {"messages": [{"id": "u2", "role": "user", "content": "and a second"}]},
            {"messages": [{"id": "u3", "role": "user", "content": "third"}]}
        ]
    });
    let Some(result) = common::http_agent(&spec).await else {
        return;
    };
    let runs = result["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for run in runs {
        assert_eq!(run["error"], Value::Null, "{run}");
        assert_eq!(run["logs"], json!([]), "{run}");
    }
    let contents: Vec<&str> = runs[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        [
            "first question",
            "You said: first question",
            "and a second",
            "You said: and a second",
            "third",
            "You said: third"
        ]
    );
    // Each request carried the whole history; the thread holds each message
    // once, in order.
    let stored = history(addr, &thread).await;
    let stored: Vec<&str> = stored.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(stored, contents);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agui_endpoint_refuses_what_is_not_a_run() {
    let mut config = Config::default();
    config.runs.agui_max_payload_bytes = 4096;
    let server = start(&config, BuiltinAgent::default(), Auth::none()).await;
    let url = format!("http://{}/api/v1/agui", server.addr);
    let client = reqwest::Client::new();
    let send = |body: String, content_type: &'static str| {
        client
            .post(&url)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let run = |thread: &str, run: &str| json!({"threadId": thread, "runId": run, "state": {}, "messages": [], "tools": [], "context": [], "forwardedProps": {}});
    let cases = [
        (
            send(run("t", "r").to_string(), "text/plain").await.unwrap(),
            415,
            "Content-Type must be application/json".to_owned(),
        ),
        (
            send("x".repeat(5000), "application/json").await.unwrap(),
            413,
            "RunAgentInput payload exceeds size limit".to_owned(),
        ),
        (
            send(json!({"threadId": 1}).to_string(), "application/json")
                .await
                .unwrap(),
            422,
            String::new(),
        ),
        (
            send(run("t", &"r".repeat(129)).to_string(), "application/json")
                .await
                .unwrap(),
            422,
            "runId exceeds length limit".to_owned(),
        ),
        (
            send(run(&"t".repeat(129), "r").to_string(), "application/json")
                .await
                .unwrap(),
            422,
            "threadId must be 1 to 128 characters".to_owned(),
        ),
        (
            send(
                {
                    let mut r = run("t", "r");
                    r["tools"] = json!([{"name": "get_current_time", "description": "mine", "parameters": {}}]);
                    r.to_string()
                },
                "application/json",
            )
            .await
            .unwrap(),
            422,
            "RunAgentInput.tools: 'get_current_time' is the name of a backend tool; frontend tools must not reuse it".to_owned(),
        ),
    ];
    for (response, want_status, want) in cases {
        assert_eq!(response.status().as_u16(), want_status, "{want}");
        let detail: Value = response.json().await.unwrap();
        let detail = detail["detail"].as_str().unwrap();
        if want.is_empty() {
            assert!(detail.starts_with("invalid RunAgentInput: "), "{detail}");
        } else {
            assert_eq!(detail, want);
        }
    }
    // Nothing above was stored.
    let counts = reqwest::get(format!("http://{}/metrics", server.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        counts.contains("agwire_runs_accepted_total 0\n"),
        "{counts}"
    );
    // 128 characters is still fine, and the answer is the run's stream.
    let ok = send(
        run(&"t".repeat(128), &"r".repeat(128)).to_string(),
        "application/json",
    )
    .await
    .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    assert_eq!(ok.headers()["content-type"], "text/event-stream");
    let log = common::sse_with_ids(&ok.bytes().await.unwrap());
    assert_eq!(log.last().map(|(_, e)| e.type_name()), Some("RUN_FINISHED"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_runs_streams_and_appends_and_are_private_with_auth() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    post(addr, &body(&thread, "m1", "hello"), None).await;
    let log = events(addr, "m1", None).await;
    // The run's end is counted once its write returns, which can be just
    // after a follower has read it: a run that ended before its follower
    // came is read from the database, whose commit the executing task
    // learns of a moment later (seen on PostgreSQL). So the counters are
    // read until they have the run's events, within a bound.
    let appended = format!("agwire_events_appended_total {}\n", log.len());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let text = loop {
        let response = reqwest::get(format!("http://{addr}/metrics"))
            .await
            .unwrap();
        assert_eq!(
            response.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let text = response.text().await.unwrap();
        if text.contains(&appended) || std::time::Instant::now() >= deadline {
            break text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert!(
        text.contains("agwire_runs{status=\"succeeded\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("agwire_runs{status=\"running\"} 0\n"),
        "{text}"
    );
    assert!(text.contains("agwire_runs_accepted_total 1\n"), "{text}");
    assert!(text.contains(&appended), "{text}");
    assert!(text.contains("agwire_active_streams 0\n"), "{text}");
    assert!(
        text.contains("agwire_event_append_seconds_count "),
        "{text}"
    );

    let secret = b"0123456789abcdef0123";
    let private = start(
        &Config::default(),
        BuiltinAgent::default(),
        Auth::jwt(secret.to_vec()),
    )
    .await;
    let url = format!("http://{}/metrics", private.addr);
    let anonymous = reqwest::get(&url).await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let token = sign_jwt(secret, "ops", jiff::Timestamp::now().as_second() + 60);
    let with_token = reqwest::Client::new()
        .get(&url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(with_token.status().as_u16(), 200);
    let mut public = Config::default();
    public.metrics.public = true;
    let open = start(&public, BuiltinAgent::default(), Auth::jwt(secret.to_vec())).await;
    let response = reqwest::get(format!("http://{}/metrics", open.addr))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_describes_exactly_the_routes_the_router_answers() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let document = get_json(addr, "/openapi.json").await;
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1"));
    let mut described: Vec<(String, String)> = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "patch", "put", "delete"].contains(&method.as_str()) {
                described.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    described.sort();
    // The routes the README and docs/API.md promise.
    let mut promised: Vec<(String, String)> = [
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("POST", "/api/v1/agui"),
        ("GET", "/api/v1/agui/capabilities"),
        ("POST", "/api/v1/agent/runs"),
        ("GET", "/api/v1/agent/runs/{runId}"),
        ("GET", "/api/v1/agent/runs/{runId}/events"),
        ("POST", "/api/v1/agent/runs/{runId}/cancel"),
        ("GET", "/api/v1/agent/history"),
        ("GET", "/api/v1/agent/threads"),
        ("GET", "/api/v1/agent/threads/{threadId}"),
        ("PATCH", "/api/v1/agent/threads/{threadId}"),
        ("DELETE", "/api/v1/agent/threads/{threadId}"),
        ("GET", "/api/v1/me/profile"),
        ("PATCH", "/api/v1/me/profile"),
        ("GET", "/api/v1/me/usage"),
        ("POST", "/api/v1/agent/attachments"),
        ("GET", "/api/v1/agent/attachments/{id}"),
        ("POST", "/api/v1/automation/jobs"),
        ("GET", "/api/v1/automation/jobs"),
        ("GET", "/api/v1/automation/jobs/{id}"),
        ("PATCH", "/api/v1/automation/jobs/{id}"),
        ("DELETE", "/api/v1/automation/jobs/{id}"),
        ("GET", "/api/v1/automation/jobs/{id}/runs"),
        ("GET", "/api/v1/calendar/events"),
    ]
    .iter()
    .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
    .collect();
    promised.sort();
    assert_eq!(described, promised);
    // Every `$ref` resolves.
    let text = document.to_string();
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &reference[..reference.find('"').unwrap()];
        assert!(
            document["components"]["schemas"][name].is_object(),
            "dangling $ref {name}"
        );
    }
    // And the router answers each of them: a route it lacks is a 405, or
    // the fallback's 404 ("no endpoint …"), never a resource's own 404.
    let client = reqwest::Client::new();
    for (method, path) in &described {
        let path = path.replace("{runId}", "none").replace("{id}", "none");
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = client
            .request(method.clone(), format!("http://{addr}{path}"))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        assert_ne!(status, 405, "{method} {path}");
        if status == 404 {
            let body: Value = response.json().await.unwrap();
            let detail = body["detail"].as_str().unwrap_or_default();
            assert!(
                !detail.is_empty() && !detail.starts_with("no endpoint"),
                "{method} {path} is not routed: {body}"
            );
        }
    }
    // A path nothing serves is a JSON 404 with a request id, like any error.
    for path in ["/nope", "/api/v1/nope", "/api/v1/agent/runs/x/nope"] {
        let response = client
            .get(format!("http://{addr}{path}?sig=secret"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 404, "{path}");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert!(response.headers().contains_key("x-request-id"), "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body, json!({"detail": format!("no endpoint GET {path}")}));
    }
}

/// Clients that go away in the middle of `POST /api/v1/agent/runs` — before
/// the body is read, while the run is being written, right after — never
/// strand a run: every run the service committed executes to its end, its
/// stream ends with its terminal event, and its thread takes the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_its_post_never_strands_a_committed_run() {
    use rand::Rng;
    use tokio::io::AsyncWriteExt;
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let mut posted = Vec::new();
    let mut rng = common::seeded_rng("a_client_that_drops_its_post_never_strands_a_committed_run");
    for round in 0..30 {
        let mut drops = Vec::new();
        for i in 0..10 {
            let thread = uuid::Uuid::new_v4().to_string();
            let run = format!("drop-{round}-{i}");
            let payload = body(&thread, &run, "hello").to_string();
            let request = format!(
                "POST /api/v1/agent/runs HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{payload}",
                payload.len()
            );
            // Half the time the body is cut short, else the client leaves
            // some microseconds after sending it all.
            let cut = rng
                .random_bool(0.2)
                .then(|| rng.random_range(1..payload.len()));
            let linger = Duration::from_micros(rng.random_range(0..3_000));
            drops.push(tokio::spawn(async move {
                let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                let bytes = request.as_bytes();
                let end = cut.map_or(bytes.len(), |c| bytes.len() - payload.len() + c);
                tcp.write_all(&bytes[..end]).await.unwrap();
                tokio::time::sleep(linger).await;
                drop(tcp);
            }));
            posted.push((thread, run));
        }
        for drop in drops {
            drop.await.unwrap();
        }
    }
    let client = reqwest::Client::new();
    let mut committed = 0;
    for (thread, run) in &posted {
        let answer = client
            .get(format!("http://{addr}/api/v1/agent/runs/{run}"))
            .send()
            .await
            .unwrap();
        if answer.status().as_u16() == 404 {
            continue; // never committed: nothing to finish
        }
        committed += 1;
        let log = events(addr, run, None).await;
        assert_valid_run(&log, thread, run);
        assert!(
            matches!(log.last(), Some((_, Event::RunFinished(_)))),
            "{run}: {log:?}"
        );
        assert_eq!(status(addr, run).await["status"], "succeeded", "{run}");
        let next = post(addr, &body(thread, &format!("{run}-next"), "again"), None).await;
        assert_eq!(next.status().as_u16(), 202, "{run}: the thread is free");
    }
    assert!(committed > 0, "no POST was committed at all");
    eprintln!(
        "{committed} of {} dropped POSTs were committed",
        posted.len()
    );
}

/// The frames of an SSE body: (id, data).
fn frames(body: &str) -> Vec<(String, String)> {
    body.split("\n\n")
        .filter_map(|block| {
            let id = block.lines().find_map(|l| l.strip_prefix("id: "))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((id.to_owned(), data.to_owned()))
        })
        .collect()
}

async fn post_agui(
    addr: std::net::SocketAddr,
    body: &Value,
    last_event_id: Option<&str>,
) -> (u16, Option<String>, String) {
    let mut request = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/agui"))
        .header("accept", "text/event-stream")
        .json(body);
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, location, response.text().await.unwrap())
}

/// What `agwire check`'s resume scenario found missing: a standard client
/// that reconnects by posting its request again with `Last-Event-ID` gets
/// exactly the rest, and the stream names its events URL in `Location`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agui_endpoint_resumes_a_reposted_request_after_last_event_id() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let run_id = format!("resume {}", uuid::Uuid::new_v4());
    let input = json!({
        "threadId": format!("t-{}", uuid::Uuid::new_v4()), "runId": run_id,
        "messages": [{"id": "u1", "role": "user", "content": "hello there"}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    });
    let (status, location, body) = post_agui(addr, &input, None).await;
    assert_eq!(status, 200);
    let encoded = run_id.replace(' ', "%20");
    assert_eq!(
        location.as_deref(),
        Some(&*format!("/api/v1/agent/runs/{encoded}/events"))
    );
    let all = frames(&body);
    assert!(all.len() > 4, "{body}");
    let (status, _, rest) = post_agui(addr, &input, Some("3")).await;
    assert_eq!(status, 200);
    assert_eq!(frames(&rest), all[3..], "exactly the events after #3");
    // At the Location, the same.
    let at_location = reqwest::Client::new()
        .get(format!("http://{addr}{}", location.unwrap()))
        .header("last-event-id", "3")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(frames(&at_location), all[3..]);
    // A reconnect that is not a number is refused, like at the events URL.
    let (status, _, detail) = post_agui(addr, &input, Some("three")).await;
    assert_eq!(status, 400, "{detail}");
    assert!(detail.contains("Last-Event-ID / after must be an event sequence number"));
    // A new run streams from its start whatever Last-Event-ID says: nothing
    // of it was delivered yet.
    let mut fresh = input.clone();
    fresh["runId"] = json!(format!("fresh-{}", uuid::Uuid::new_v4()));
    let (status, _, body) = post_agui(addr, &fresh, Some("3")).await;
    assert_eq!(status, 200);
    assert_eq!(frames(&body)[0].0, "1");
}
