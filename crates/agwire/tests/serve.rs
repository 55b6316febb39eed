//! `agwire serve` as a process: killed with SIGKILL while 50 runs are in
//! flight and started again, nothing accepted is lost or duplicated and every
//! log is a valid AG-UI run; SIGTERM drains (grace, then cancel); a config
//! file is read and a typo in it refuses to start.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agwire_client::core::{Event, RunFinishedOutcome};
use serde_json::{Value, json};

use crate::common;
use common::{
    body, checked_log, data_dir, first_line, get, output_within, post, serve, wait_final,
};

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    common::wait_exit(child, Duration::from_secs(30))
}

const WORDS: &str = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty";

/// The stage each run is at in the database a killed process left, read
/// straight from the file: `accepted` (queued), `claimed` (running, nothing
/// logged yet), `streaming` (running, events logged) or `ended`.
fn stages(dir: &Path) -> std::collections::BTreeMap<String, &'static str> {
    let connection = rusqlite::Connection::open(dir.join("agwire.db")).unwrap();
    let rows: Vec<(String, String, i64)> = connection
        .prepare(
            "SELECT r.run_id, r.status, (SELECT COALESCE(SUM(e.n_events), 0) FROM run_events e WHERE e.task_id = r.task_id) FROM runs r",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.into_iter()
        .map(|(run, status, logged)| {
            let stage = match (status.as_str(), logged) {
                ("queued", _) => "accepted",
                ("running", 0) => "claimed",
                ("running", _) => "streaming",
                _ => "ended",
            };
            (run, stage)
        })
        .collect()
}

/// Follows a run's stream in the background; what it received so far.
fn follow(
    client: &reqwest::Client,
    base: &str,
    run: &str,
) -> std::sync::Arc<std::sync::Mutex<Vec<u8>>> {
    use futures_util::StreamExt;
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = received.clone();
    let request = client.get(format!("{base}/api/v1/agent/runs/{run}/events"));
    tokio::spawn(async move {
        let Ok(response) = request.send().await else {
            return;
        };
        let mut body = response.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            into.lock().unwrap().extend_from_slice(&chunk);
        }
    });
    received
}

/// Waits until a followed stream has received `n` events (or fails after
/// ~30 s).
async fn wait_for_frames(received: &std::sync::Mutex<Vec<u8>>, n: usize) {
    for _ in 0..3000 {
        if frames(&received.lock().unwrap()).len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the stream never got {n} events");
}

fn frames(bytes: &[u8]) -> Vec<Event> {
    let mut events = Vec::new();
    let mut decoder = agwire_codec::sse::SseEventDecoder::new();
    // A stream cut by the kill may end mid-frame: the whole frames count.
    let _ = decoder.push(bytes, &mut events);
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_50_runs_in_flight_loses_nothing() {
    let dir = data_dir("kill9");
    let client = reqwest::Client::new();
    let server = serve(
        &dir,
        &["--busy-thread", "enqueue"],
        &[("AGWIRE_BUILTIN_TOKEN_DELAY_MS", "250")],
    );
    let threads: Vec<String> = (0..40).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    // 40 running runs, and 10 more queued behind the first 10 of them.
    let mut runs: Vec<(String, String, String)> = Vec::new();
    for (i, thread) in threads.iter().enumerate() {
        runs.push((thread.clone(), format!("r{i}"), format!("{i} {WORDS}")));
    }
    for (i, thread) in threads.iter().take(10).enumerate() {
        runs.push((thread.clone(), format!("q{i}"), format!("queued {i}")));
    }
    for (thread, run, text) in &runs {
        assert_eq!(
            post(&client, &server.base, &body(thread, run, text)).await,
            202
        );
    }
    // Clients follow ten of the running runs; the plug is pulled once each
    // of them has received a few events (mid-stream), not after a guess.
    let watched: Vec<(String, _)> = (30..40)
        .map(|i| {
            let run = format!("r{i}");
            let received = follow(&client, &server.base, &run);
            (run, received)
        })
        .collect();
    for (_, received) in &watched {
        wait_for_frames(received, 4).await;
    }
    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    drop(server);
    let streamed: Vec<(String, Vec<Event>)> = watched
        .iter()
        .map(|(run, r)| (run.clone(), frames(&r.lock().unwrap())))
        .collect();
    for (run, events) in &streamed {
        assert!(events.len() >= 4, "{run} was not mid-stream at the kill");
    }
    let at_kill = stages(&dir);
    assert_eq!(at_kill.len(), 50);
    assert!(
        at_kill.values().all(|s| *s != "ended"),
        "every run was still in flight at the kill: {at_kill:?}"
    );

    let server = serve(&dir, &["--busy-thread", "enqueue"], &[]);
    let base = &server.base;
    let mut answered = std::collections::HashSet::new();
    let mut failed = 0;
    for (thread, run, _) in &runs {
        let status = wait_final(&client, base, run).await;
        let events = checked_log(&client, base, thread, run).await;
        match status["status"].as_str().unwrap() {
            "failed" => {
                // Only a run that was executing can have been interrupted.
                assert!(run.starts_with('r'), "{run}");
                assert_eq!(status["error"]["code"], "server_restart", "{status}");
                let Some(Event::RunError(error)) = events.last() else {
                    panic!("{run}: {events:?}")
                };
                assert_eq!(error.code.as_deref(), Some("server_restart"));
                failed += 1;
            }
            // Not yet taken by a worker at the kill: picked up at the start.
            "succeeded" => {
                answered.insert(run.clone());
            }
            other => panic!("{run}: {other}"),
        }
    }
    assert!(failed > 0, "the kill interrupted no run");
    assert_eq!(failed + answered.len(), 50);
    // What the clients saw before the kill is what the log still says.
    for (run, seen) in &streamed {
        let thread = &runs.iter().find(|(_, r, _)| r == run).unwrap().0;
        let log = checked_log(&client, base, thread, run).await;
        assert_eq!(&log[..seen.len()], &seen[..], "{run}");
    }
    // Every user message is in its thread exactly once, in turn order; each
    // completed run answered once.
    for (i, thread) in threads.iter().enumerate() {
        let history = get(
            &client,
            base,
            &format!("/api/v1/agent/history?threadId={thread}"),
        )
        .await;
        let first = format!("{i} {WORDS}");
        let mut expected = vec![json!({"role": "user", "content": first})];
        if answered.contains(&format!("r{i}")) {
            expected.push(json!({"role": "assistant", "content": format!("You said: {first}")}));
        }
        if i < 10 {
            assert!(answered.contains(&format!("q{i}")), "q{i}");
            expected.push(json!({"role": "user", "content": format!("queued {i}")}));
            expected.push(json!({"role": "assistant", "content": format!("You said: queued {i}")}));
        }
        // Role and content of each message, in order (other fields aside).
        let messages = history["messages"].as_array().unwrap();
        let said: Vec<Value> = messages
            .iter()
            .map(|m| json!({"role": m["role"], "content": m["content"]}))
            .collect();
        assert_eq!(said, expected, "thread {i}");
    }
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for stage in at_kill.values() {
        *counts.entry(stage).or_default() += 1;
    }
    eprintln!(
        "kill -9 mid-stream: runs at the kill {counts:?}; {failed} interrupted (failed, server_restart), {} completed after the restart",
        answered.len()
    );
}

/// Killed while runs are being accepted, claimed and started: whatever
/// stage each run was at, after the restart every log is a valid run —
/// `RUN_STARTED` first, exactly one terminal event, last — and every
/// accepted run is terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_while_runs_start_leaves_only_valid_logs() {
    let client = reqwest::Client::new();
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    let mut runs_checked = 0;
    // A few kills at different points of the starting wave.
    for (round, wait_for) in [0usize, 10, 30].into_iter().enumerate() {
        let dir = data_dir("kill9-start");
        let mut server = serve(
            &dir,
            &["--busy-thread", "enqueue"],
            &[("AGWIRE_BUILTIN_TOKEN_DELAY_MS", "100")],
        );
        let base = server.base.clone();
        // Posted concurrently, so acceptance, claims and first events overlap.
        let runs: Vec<(String, String)> = (0..60)
            .map(|i| {
                // Half the threads take two runs (the second waits).
                let thread = format!("00000000-0000-4000-a000-{:012x}", round * 100 + i % 30);
                (thread, format!("s{round}-{i}"))
            })
            .collect();
        let mut posts = Vec::new();
        for (thread, run) in &runs {
            let client = client.clone();
            let url = format!("{base}/api/v1/agent/runs");
            let payload = body(thread, run, "a short question");
            posts.push(tokio::spawn(async move {
                client
                    .post(url)
                    .json(&payload)
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
            }));
        }
        let mut accepted = 0;
        for post in posts {
            if matches!(post.await.unwrap(), Ok(202)) {
                accepted += 1;
            }
            if accepted == wait_for.max(1) {
                // Pull the plug while the rest are still arriving.
                break;
            }
        }
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        drop(server);
        let at_kill = stages(&dir);
        for stage in at_kill.values() {
            *seen.entry(stage).or_default() += 1;
        }
        let server = serve(&dir, &["--busy-thread", "enqueue"], &[]);
        for run in at_kill.keys() {
            let thread = &runs.iter().find(|(_, r)| r == run).unwrap().0;
            let status = wait_final(&client, &server.base, run).await;
            let log = checked_log(&client, &server.base, thread, run).await;
            assert!(
                matches!(log.first(), Some(Event::RunStarted(_))),
                "{run}: the log starts with RUN_STARTED: {log:?}"
            );
            assert!(
                ["succeeded", "failed"].contains(&status["status"].as_str().unwrap()),
                "{run}: {status}"
            );
            runs_checked += 1;
        }
    }
    eprintln!("kill -9 while starting: {runs_checked} runs checked; stages at the kills {seen:?}");
    assert!(seen.get("accepted").is_some_and(|n| *n > 0), "{seen:?}");
    assert!(
        seen.get("streaming").is_some_and(|n| *n > 0)
            || seen.get("claimed").is_some_and(|n| *n > 0),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_gives_grace_then_cancels() {
    let client = reqwest::Client::new();

    // Grace long enough: the run finishes, then the process exits.
    let dir = data_dir("drain");
    let mut server = serve(
        &dir,
        &["--grace", "30"],
        &[("AGWIRE_BUILTIN_TOKEN_DELAY_MS", "20")],
    );
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post(&client, &server.base, &body(&thread, "graceful", WORDS)).await,
        202
    );
    // SIGTERM once the run is executing (its stream has begun).
    let started = follow(&client, &server.base, "graceful");
    wait_for_frames(&started, 2).await;
    sigterm(&server.child);
    assert!(wait_exit(&mut server.child).success());
    drop(server);
    let server = serve(&dir, &[], &[]);
    let status = wait_final(&client, &server.base, "graceful").await;
    assert_eq!(status["status"], "succeeded");
    checked_log(&client, &server.base, &thread, "graceful").await;
    drop(server);

    // No grace: the running run ends cancelled, its stream closes, and the
    // process exits.
    let dir = data_dir("drain0");
    let mut server = serve(
        &dir,
        &["--grace", "0"],
        &[("AGWIRE_BUILTIN_TOKEN_DELAY_MS", "200")],
    );
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post(&client, &server.base, &body(&thread, "cut", WORDS)).await,
        202
    );
    let stream = follow(&client, &server.base, "cut");
    // SIGTERM mid-stream: once a few events have arrived.
    wait_for_frames(&stream, 3).await;
    sigterm(&server.child);
    assert!(wait_exit(&mut server.child).success());
    drop(server);
    let frames = frames(&stream.lock().unwrap());
    let Some(Event::RunFinished(end)) = frames.last() else {
        panic!("{frames:?}")
    };
    assert_eq!(end.outcome, Some(RunFinishedOutcome::Cancelled));
    let server = serve(&dir, &[], &[]);
    let status = wait_final(&client, &server.base, "cut").await;
    assert_eq!(status["status"], "cancelled");
    let log = checked_log(&client, &server.base, &thread, "cut").await;
    assert_eq!(log, frames);
}

#[test]
fn a_config_file_is_read_and_a_typo_refuses_to_start() {
    let dir = data_dir("config");
    let file = dir.join("agwire.toml");
    std::fs::write(&file, "[runs]\nbusy_thread = \"enqueue\"\n").unwrap();
    let server = serve(&dir, &["--config", file.to_str().unwrap()], &[]);
    drop(server);
    std::fs::write(&file, "[runs]\nbusy_threads = \"enqueue\"\n").unwrap();
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_agwire"))
            .args(["serve", "--addr", "127.0.0.1:0", "--config"])
            .arg(&file),
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("busy_threads"), "{stderr}");
    // A public address without auth is refused before anything binds.
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_agwire"))
            .args(["serve", "--addr", "0.0.0.0:0", "--data-dir"])
            .arg(&dir)
            .env_remove("AGWIRE_JWT_SECRET"),
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refusing to listen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The agent-run API's calendar example through the whole pipeline (scripted model)
/// in a process whose own zone is Asia/Tokyo: the event zone comes from the
/// device, else the profile, else UTC — never the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calendar_times_follow_the_device_then_the_profile_then_utc_never_the_server() {
    let client = reqwest::Client::new();
    let dir = data_dir("tz");
    let server = serve(&dir, &[], &[("TZ", "Asia/Tokyo")]);
    let base = &server.base;
    let ask = |thread: &str, run: &str, client_time: Option<Value>| {
        let mut request = body(thread, run, "帮我明天早上9点创建一个日历");
        if let Some(time) = client_time {
            request["forwardedProps"]["client_time"] = time;
        }
        request
    };
    let created = |events: &[Event]| -> Value {
        events
            .iter()
            .find_map(|e| match e {
                Event::ToolCallResult(r) => serde_json::from_str::<Value>(&r.content.text())
                    .ok()
                    .filter(|v| v.get("event").is_some()),
                _ => None,
            })
            .expect("calendar_write succeeded")
    };

    // 1. The device's zone and clock (the agent-run API's documented example).
    let thread = uuid::Uuid::new_v4().to_string();
    let device = json!({"device_timezone": "America/Los_Angeles",
        "client_now_iso": "2026-03-16T09:12:33-07:00", "client_epoch_ms": 1_773_677_553_000_i64});
    assert_eq!(
        post(&client, base, &ask(&thread, "tz-device", Some(device))).await,
        202
    );
    wait_final(&client, base, "tz-device").await;
    let events = checked_log(&client, base, &thread, "tz-device").await;
    let event = created(&events);
    assert_eq!(event["event"]["start_utc"], "2026-03-17T16:00:00Z");
    assert_eq!(event["event"]["event_timezone"], "America/Los_Angeles");

    // 2. No device time: the profile's zone, with the server's instant.
    let profile = client
        .patch(format!("{base}/api/v1/me/profile"))
        .json(&json!({"settings": {"timezone": "Asia/Kolkata"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(profile.status().as_u16(), 200);
    let expected = |zone: &str| {
        let tz = jiff::tz::TimeZone::get(zone).unwrap();
        let tomorrow = jiff::Timestamp::now()
            .to_zoned(tz.clone())
            .date()
            .tomorrow()
            .unwrap();
        tomorrow
            .at(9, 0, 0, 0)
            .to_zoned(tz)
            .unwrap()
            .timestamp()
            .to_string()
    };
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post(&client, base, &ask(&thread, "tz-profile", None)).await,
        202
    );
    wait_final(&client, base, "tz-profile").await;
    let event = created(&checked_log(&client, base, &thread, "tz-profile").await);
    assert_eq!(event["event"]["event_timezone"], "Asia/Kolkata");
    assert_eq!(event["event"]["start_utc"], expected("Asia/Kolkata"));

    // 3. Neither: UTC (not Tokyo).
    let cleared = client
        .patch(format!("{base}/api/v1/me/profile"))
        .json(&json!({"settings": {"timezone": null}}))
        .send()
        .await
        .unwrap();
    assert_eq!(cleared.status().as_u16(), 200);
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post(&client, base, &ask(&thread, "tz-utc", None)).await,
        202
    );
    wait_final(&client, base, "tz-utc").await;
    let event = created(&checked_log(&client, base, &thread, "tz-utc").await);
    assert_eq!(event["event"]["event_timezone"], "UTC");
    assert_eq!(event["event"]["start_utc"], expected("UTC"));

    // The calendar API shows all three; /healthz says what answered.
    let calendar = get(
        &client,
        base,
        "/api/v1/calendar/events?from=2026-01-01T00:00:00Z&to=2100-01-01T00:00:00Z",
    )
    .await;
    assert_eq!(calendar["events"].as_array().unwrap().len(), 3);
    let health = get(&client, base, "/healthz").await;
    assert_eq!(health["agent"], "scripted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_holds_a_conversation_with_tools_on_an_openai_compatible_provider() {
    let (url, seen) = common::fake_provider(None).await;
    let client = reqwest::Client::new();
    let dir = data_dir("provider");
    let server = serve(
        &dir,
        &[],
        &[
            ("AGWIRE_LLM_BASE_URL", url.as_str()),
            ("AGWIRE_LLM_API_KEY", "sk-local"),
            ("AGWIRE_LLM_MODEL", "fake-model"),
        ],
    );
    let base = &server.base;
    assert_eq!(
        get(&client, base, "/healthz").await["agent"],
        "openai:fake-model"
    );
    let thread = uuid::Uuid::new_v4().to_string();
    let mut request = body(&thread, "real-1", "what time is it for me?");
    request["forwardedProps"]["client_time"] = json!({"device_timezone": "Europe/Paris",
        "client_now_iso": "2026-03-16T17:12:33+01:00", "client_epoch_ms": 1_773_677_553_000_i64});
    assert_eq!(post(&client, base, &request).await, 202);
    let status = wait_final(&client, base, "real-1").await;
    assert_eq!(status["status"], "succeeded", "{status}");
    let events = checked_log(&client, base, &thread, "real-1").await;
    assert!(events.iter().any(|e| matches!(e, Event::ToolCallResult(_))));
    let history = get(
        &client,
        base,
        &format!("/api/v1/agent/history?threadId={thread}"),
    )
    .await;
    let answer = history["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        answer["content"],
        "It is 2026-03-16T17:12:33+01:00 where you are."
    );
    // Three calls reached the provider, authenticated, as the model named.
    let seen: Vec<Value> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(body, _)| body.clone())
        .collect();
    assert_eq!(seen.len(), 3);
    assert!(
        seen.iter()
            .all(|r| r["model"] == "fake-model" && r["stream"] == true)
    );
    assert_eq!(
        seen[2]["messages"].as_array().unwrap().last().unwrap()["role"],
        "tool"
    );
    assert_eq!(status["usage"].as_array().map(Vec::len), Some(3));
}

/// What an operator sees without configuring anything: `info` lines for
/// each request and each run on stderr, no colour codes when stderr is not
/// a terminal; with `--log-format json`, one JSON object per line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_one_line_per_request_and_per_run_plain_or_json() {
    for json in [false, true] {
        let dir = data_dir("logs");
        let log_path = dir.join("stderr.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_agwire"));
        command
            .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
            .arg(&dir)
            .env_remove("RUST_LOG")
            .env_remove("AGWIRE_JWT_SECRET")
            .env_remove("AGWIRE_LOG_FORMAT")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log_path).unwrap());
        if json {
            command.args(["--log-format", "json"]);
        }
        let mut child = command.spawn().unwrap();
        let line = first_line(&mut child, Duration::from_secs(60));
        let base = line.trim().strip_prefix("listening ").unwrap().to_owned();
        let client = reqwest::Client::new();
        let thread = uuid::Uuid::new_v4().to_string();
        assert_eq!(
            post(&client, &base, &body(&thread, "logged", "hi")).await,
            202
        );
        wait_final(&client, &base, "logged").await;
        // Paths nothing serves (the API's and the web app's side): a JSON
        // 404 with a request id, and a request line like any other answer.
        let mut missing = Vec::new();
        for path in ["/nope", "/api/v1/nope"] {
            let response = client.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(response.status().as_u16(), 404, "{path}");
            assert_eq!(response.headers()["content-type"], "application/json");
            let id = response.headers()["x-request-id"]
                .to_str()
                .unwrap()
                .to_owned();
            let answer: Value = response.json().await.unwrap();
            assert_eq!(answer, json!({"detail": format!("no endpoint GET {path}")}));
            missing.push((path, id));
        }
        // The run's line is written when it ends; give the writer a moment
        // by waiting for it (and the 404s' lines) to show up.
        let mut text = String::new();
        for _ in 0..500 {
            text = std::fs::read_to_string(&log_path).unwrap();
            if text.contains("run ended") && missing.iter().all(|(_, id)| text.contains(id)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            !text.contains('\u{1b}'),
            "no ANSI escapes in a file:\n{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        let request = lines
            .iter()
            .find(|l| l.contains("/api/v1/agent/runs") && l.contains("202"))
            .unwrap_or_else(|| panic!("no request line:\n{text}"));
        let run = lines
            .iter()
            .find(|l| l.contains("run ended"))
            .unwrap_or_else(|| panic!("no run line:\n{text}"));
        assert!(
            run.contains("logged") && run.contains(&thread) && run.contains("succeeded"),
            "{run}"
        );
        assert!(run.contains("output_tokens"), "{run}");
        if json {
            for line in &lines {
                serde_json::from_str::<Value>(line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            }
            let request: Value = serde_json::from_str(request).unwrap();
            assert_eq!(request["fields"]["status"], 202, "{request}");
            assert_eq!(request["span"]["path"], "/api/v1/agent/runs", "{request}");
        } else {
            assert!(request.contains("status=202"), "{request}");
        }
        for (path, id) in &missing {
            let line = lines
                .iter()
                .find(|l| l.contains(id.as_str()) && l.contains("404"))
                .unwrap_or_else(|| panic!("no request line for {path} ({id}):\n{text}"));
            if json {
                let line: Value = serde_json::from_str(line).unwrap();
                assert_eq!(line["fields"]["status"], 404, "{line}");
                assert_eq!(line["span"]["path"], *path, "{line}");
            } else {
                assert!(line.contains("status=404") && line.contains(path), "{line}");
            }
        }
    }
}

/// `agwire check` (the binary, as a user runs it) against `agwire serve`'s
/// standard endpoint: every scenario the built-in agent takes part in passes
/// — the aborted run keeps its thread until it ends (runs outlive their
/// connection, to be resumed), so the next run waits for it, and resumption
/// goes to the stream's `Location`. The table is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agwire_check_passes_the_standard_endpoint() {
    let dir = data_dir("check");
    // Slow enough that the cancel scenario aborts mid-stream.
    let server = serve(&dir, &[], &[("AGWIRE_BUILTIN_TOKEN_DELAY_MS", "20")]);
    let junit = dir.join("check.xml");
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_agwire"))
            .args(["check", &format!("{}/api/v1/agui", server.base)])
            .args([
                "--capabilities",
                &format!("{}/api/v1/agui/capabilities", server.base),
            ])
            .args(["--timeout", "20", "--junit"])
            .arg(&junit),
        Duration::from_secs(120),
    );
    let table = String::from_utf8_lossy(&output.stdout);
    println!("{table}");
    assert!(
        output.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for scenario in [
        "text",
        "history",
        "frontend-tools",
        "cancel",
        "bad-input",
        "negotiation",
        "resume",
        "capabilities",
    ] {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("{scenario} ")))
            .unwrap_or_else(|| panic!("{scenario} missing:\n{table}"));
        assert!(line.contains(" pass "), "{line}");
    }
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"0\""), "{xml}");
}
