//! The service over real HTTP on loopback, on a real database (SQLite, or
//! PostgreSQL with `AGWIRE_TEST_STORE=postgres`): accept →
//! 202 → the run executes in the background → its log streams, resumes from
//! every cut point, and replays when finished; the POST can stream directly
//! (the official `HttpAgent` consumes it); errors are the seed's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // helpers outside #[test] fns; the store is announced

use crate::common;

use std::sync::Arc;

use agwire_client::core::pipeline::Pipeline;
use agwire_client::core::{Event, RunAgentInput};
use agwire_codec::sse::SseEventDecoder;
use agwire_service::run::{Admission, RunOptions, RunStatus};
use agwire_service::store::NewRun;
use agwire_service::{BuiltinAgent, Service};
use common::{body, events, post, reqwest_like, serve, sse_with_ids};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_accepted_executed_logged_and_resumable() {
    let addr = serve().await;
    let thread = uuid::Uuid::new_v4().to_string();
    let response = post(addr, &body(&thread, "run-1", "what time is it?"), None).await;
    assert_eq!(response.status().as_u16(), 202);
    assert_eq!(
        response.headers()["location"],
        "/api/v1/agent/runs/run-1/events"
    );
    let accepted: Value = response.json().await.unwrap();
    assert_eq!(accepted["threadId"], thread);
    assert_eq!(accepted["runId"], "run-1");
    assert_eq!(accepted["created"], true);

    let log = events(addr, "run-1", None).await;
    let seqs: Vec<u64> = log.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
    let types: Vec<&str> = log.iter().map(|(_, e)| e.type_name()).collect();
    assert_eq!(types.first(), Some(&"RUN_STARTED"));
    assert_eq!(types.last(), Some(&"RUN_FINISHED"));
    assert!(types.contains(&"TOOL_CALL_RESULT"), "{types:?}");
    // The log is a valid stream for the official rules.
    let input: RunAgentInput =
        serde_json::from_value(body(&thread, "run-1", "what time is it?")).unwrap();
    let mut pipeline = Pipeline::for_input(&input);
    for (_, event) in &log {
        pipeline.push(event.clone()).unwrap();
    }
    let steps: Vec<String> = log
        .iter()
        .filter_map(|(_, e)| match e {
            Event::StepStarted(s) => Some(s.step_name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(steps, ["router", "worker"]);

    // Resuming after any event gives exactly the rest; `?after=` too.
    for cut in 0..=log.len() as u64 {
        let rest = events(addr, "run-1", Some(cut)).await;
        assert_eq!(rest, log[cut as usize..], "after {cut}");
    }
    let rest = reqwest_like(addr, "/api/v1/agent/runs/run-1/events?after=3")
        .send()
        .await
        .unwrap();
    assert_eq!(sse_with_ids(&rest.bytes().await.unwrap()), log[3..]);

    let status: Value = reqwest::get(format!("http://{addr}/api/v1/agent/runs/run-1"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "succeeded");

    // Re-posting the same request: the original answer, no second run.
    let again = post(addr, &body(&thread, "run-1", "what time is it?"), None).await;
    assert_eq!(again.status().as_u16(), 202);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["taskId"], accepted["taskId"]);
    // Same ids, another body: conflict.
    let conflict = post(addr, &body(&thread, "run-1", "something else"), None).await;
    assert_eq!(conflict.status().as_u16(), 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_rules_answer_with_their_exact_messages() {
    let addr = serve().await;
    let thread = uuid::Uuid::new_v4().to_string();
    let cases = [
        (
            with(body(&thread, "r", "hi"), "/threadId", json!("t-1")),
            422,
            "threadId must be a valid UUID",
        ),
        (
            with(body(&thread, "r", "hi"), "/forwardedProps", json!({})),
            422,
            "invalid RunAgentInput.forwardedProps",
        ),
        (
            with(body(&thread, "r", "hi"), "/runId", json!("r".repeat(129))),
            422,
            "runId exceeds length limit",
        ),
        (
            with(
                body(&thread, "r", "hi"),
                "/context",
                json!([{"description": "pad", "value": "x".repeat(300_000)}]),
            ),
            413,
            "RunAgentInput payload exceeds size limit",
        ),
        (
            with(
                body(&thread, "r", "hi"),
                "/messages/0/content",
                json!([{"type": "binary", "mimeType": "image/png", "url": "https://elsewhere.example/a.png"}]),
            ),
            422,
            "binary content url is not a valid signed URL",
        ),
    ];
    for (request, status, message) in cases {
        let response = post(addr, &request, None).await;
        assert_eq!(response.status().as_u16(), status, "{message}");
        let detail: Value = response.json().await.unwrap();
        assert_eq!(detail, json!({"detail": message}));
    }
    // Nothing was stored: the thread has no run.
    let missing = reqwest::get(format!("http://{addr}/api/v1/agent/runs/r"))
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
}

fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    *value.pointer_mut(pointer).unwrap() = new;
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_post_streams_directly_when_asked_and_the_official_client_reads_it() {
    let addr = serve().await;
    let thread = uuid::Uuid::new_v4().to_string();
    let response = post(
        addr,
        &body(&thread, "s-1", "hello"),
        Some("text/event-stream"),
    )
    .await;
    assert_eq!(response.status().as_u16(), 200);
    let mut decoder = SseEventDecoder::new();
    let mut streamed = Vec::new();
    decoder
        .push(&response.bytes().await.unwrap(), &mut streamed)
        .unwrap();
    assert_eq!(streamed.last().map(Event::type_name), Some("RUN_FINISHED"));

    let spec = json!({
        "url": format!("http://{addr}/api/v1/agent/runs"),
        "format": "sse",
        "threadId": uuid::Uuid::new_v4().to_string(),
        "runs": [{"runId": "h-1", "messages": [{"id": "u1", "role": "user", "content": "hi there"}],
                  "forwardedProps": {"runtime_mode": "chat"}}]
    });
    let Some(result) = common::http_agent(&spec).await else {
        return;
    };
    let run = &result["runs"][0];
    assert_eq!(run["error"], Value::Null, "{run}");
    assert_eq!(run["logs"], json!([]));
    let messages = run["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"], "You said: hi there");
}

/// A stored log is a valid AG-UI run: numbered 1..n, `RUN_STARTED` first,
/// exactly one terminal event and it is last, and the official rules accept
/// it.
fn assert_valid_log(log: &[(u64, Event)], thread: &str, run: &str) {
    let ids: Vec<u64> = log.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=log.len() as u64).collect::<Vec<_>>(), "{run}");
    assert_eq!(
        log.first().map(|(_, e)| e.type_name()),
        Some("RUN_STARTED"),
        "{run}: {log:?}"
    );
    let terminal = |e: &Event| matches!(e, Event::RunFinished(_) | Event::RunError(_));
    assert_eq!(log.iter().filter(|(_, e)| terminal(e)).count(), 1, "{run}");
    assert!(log.last().is_some_and(|(_, e)| terminal(e)), "{run}");
    let input: RunAgentInput = serde_json::from_value(body(thread, run, "x")).unwrap();
    let mut pipeline = Pipeline::for_input(&input);
    for (_, event) in log {
        pipeline
            .push(event.clone())
            .unwrap_or_else(|e| panic!("{run}: {e}"));
    }
}

/// A crash can leave a run at every stage: accepted (queued), claimed before
/// its first event was written, mid-stream (a text message open), or ended.
/// After the restart every log is a valid run, interrupted ones end with
/// `RUN_ERROR server_restart` after what they had said, queued ones execute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_leaves_a_valid_log_at_every_stage_a_crash_can_leave() {
    use agwire_client::core::{RunFinishedEvent, TextMessageContentEvent, TextMessageStartEvent};
    use agwire_service::store::Ending;
    use agwire_service::validate::{Rules, validate_run};
    let database = common::Database::fresh("restart").await;
    let thread = |_: &str| uuid::Uuid::new_v4().to_string();
    let threads: Vec<(String, &str)> = ["accepted", "claimed", "streaming", "ended"]
        .into_iter()
        .map(|stage| (thread(stage), stage))
        .collect();
    let mut said_before = Vec::new();
    {
        // The process that crashes: on PostgreSQL its leases run out a
        // second after it stops, and a survivor ends what it left.
        let store = database
            .open_with_lease(std::time::Duration::from_secs(1))
            .await;
        let valid = |b: Value| {
            validate_run(b.to_string().as_bytes(), &Rules::default())
                .unwrap()
                .input
        };
        let nothing: agwire_service::store::OnClaim = Arc::new(|_: &str| {});
        for (thread, stage) in threads.iter().skip(1) {
            let input = valid(body(thread, stage, "hi"));
            let accepted = store.accept_run(new_run(&input, stage, 1)).await.unwrap();
            let claimed = store
                .claim_runnable(10, 2, nothing.clone(), nothing.clone())
                .await
                .unwrap();
            assert_eq!(claimed.len(), 1);
            let started = agwire_service::store::run_started(thread, stage);
            match *stage {
                "streaming" => {
                    let events = [
                        started,
                        Event::TextMessageStart({
                            let mut event = TextMessageStartEvent::new("m");
                            event.role = Default::default();
                            event
                        }),
                        Event::TextMessageContent(TextMessageContentEvent::new("m", "half an ans")),
                    ];
                    store
                        .append_events(&accepted.task_id, &events)
                        .await
                        .unwrap();
                    said_before = events.to_vec();
                }
                "ended" => {
                    store
                        .append_events(&accepted.task_id, &[started])
                        .await
                        .unwrap();
                    let finished =
                        Event::RunFinished(RunFinishedEvent::new(thread.clone(), *stage));
                    let ending = Ending {
                        status: RunStatus::Succeeded,
                        error: None,
                        usage: None,
                        events: &[],
                        terminal: &finished,
                        output: &[],
                        ui_schema: None,
                        calls_expire_at: None,
                        tokens: 0,
                    };
                    store.end_run(&accepted.task_id, &ending, 3).await.unwrap();
                }
                // "claimed": nothing written yet.
                _ => {}
            }
        }
        // Accepted last, so the claims above did not take it.
        let (thread, stage) = &threads[0];
        let input = valid(body(thread, stage, "hello"));
        store.accept_run(new_run(&input, stage, 4)).await.unwrap();
    }
    let service = Service::new(database.open().await, Arc::new(BuiltinAgent::default()));
    service.start().await.unwrap();
    let addr = common::listen(&service).await;

    for (thread, stage) in &threads {
        let log = events(addr, stage, None).await;
        assert_valid_log(&log, thread, stage);
        let status = common::status(addr, stage).await;
        let last = &log.last().unwrap().1;
        match *stage {
            "accepted" | "ended" => {
                assert_eq!(status["status"], "succeeded", "{stage}");
                assert_eq!(last.type_name(), "RUN_FINISHED", "{stage}");
            }
            _ => {
                assert_eq!(status["status"], "failed", "{stage}");
                assert_eq!(status["error"]["code"], "server_restart", "{stage}");
                let Event::RunError(error) = last else {
                    panic!("{stage}: {log:?}")
                };
                assert_eq!(error.code.as_deref(), Some("server_restart"));
            }
        }
        if *stage == "claimed" {
            assert_eq!(log.len(), 2, "RUN_STARTED, then the error: {log:?}");
        }
        if *stage == "streaming" {
            let kept: Vec<Event> = log[..3].iter().map(|(_, e)| e.clone()).collect();
            assert_eq!(kept, said_before, "what was streamed stays as it was");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_shows_the_days_user_and_assistant_messages_but_never_tools() {
    let addr = serve().await;
    let empty: Value = reqwest::get(format!("http://{addr}/api/v1/agent/history"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        empty,
        json!({"scope": "history_day", "threadId": null, "day": null, "hasMore": false, "messages": []})
    );
    let thread = uuid::Uuid::new_v4().to_string();
    for (run, text) in [("h-1", "what time is it?"), ("h-2", "thanks")] {
        post(addr, &body(&thread, run, text), None).await;
        // Seeing the terminal event means the turn is stored.
        let log = events(addr, run, None).await;
        assert_eq!(log.last().map(|(_, e)| e.type_name()), Some("RUN_FINISHED"));
    }
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .to_string();
    let history: Value = reqwest::get(format!("http://{addr}/api/v1/agent/history"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(history["threadId"], thread);
    assert_eq!(history["day"], today);
    assert_eq!(history["hasMore"], false);
    let shown: Vec<(String, String)> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("user".to_owned(), "what time is it?".to_owned()),
            (
                "assistant".to_owned(),
                "You said: what time is it?".to_owned()
            ),
            ("user".to_owned(), "thanks".to_owned()),
            ("assistant".to_owned(), "You said: thanks".to_owned()),
        ]
    );
    let seqs: Vec<i64> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_i64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // Before today: nothing. An unknown thread: 404. A bad date: 422.
    let earlier: Value = reqwest::get(format!(
        "http://{addr}/api/v1/agent/history?threadId={thread}&before={today}"
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(earlier["day"], Value::Null);
    let unknown = reqwest::get(format!(
        "http://{addr}/api/v1/agent/history?threadId={}",
        uuid::Uuid::new_v4()
    ))
    .await
    .unwrap();
    assert_eq!(unknown.status().as_u16(), 404);
    let bad = reqwest::get(format!(
        "http://{addr}/api/v1/agent/history?before=yesterday"
    ))
    .await
    .unwrap();
    assert_eq!(bad.status().as_u16(), 422);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_profile_time_zone_decides_history_days() {
    let addr = serve().await;
    let client = reqwest::Client::new();
    let profile = format!("http://{addr}/api/v1/me/profile");
    let initial: Value = client
        .get(&profile)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(initial["settings"], json!({}));
    for (patch, message) in [
        (
            json!({"settings": {"timezone": "Mars/Olympus"}}),
            "invalid settings.timezone",
        ),
        (
            json!({"settings": {"locale": "not a locale!"}}),
            "invalid settings.locale",
        ),
        (json!({"nickname": "x"}), "unknown profile field 'nickname'"),
    ] {
        let response = client.patch(&profile).json(&patch).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 422);
        assert_eq!(
            response.json::<Value>().await.unwrap(),
            json!({"detail": message})
        );
    }
    let updated: Value = client
        .patch(&profile)
        .json(&json!({"settings": {"timezone": "Pacific/Kiritimati", "locale": "zh-CN"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        updated["settings"],
        json!({"timezone": "Pacific/Kiritimati", "locale": "zh-CN"})
    );

    let thread = uuid::Uuid::new_v4().to_string();
    post(addr, &body(&thread, "p-1", "hello"), None).await;
    events(addr, "p-1", None).await;
    // UTC+14: the day is Kiritimati's, not UTC's.
    let kiritimati = jiff::tz::TimeZone::get("Pacific/Kiritimati").unwrap();
    let expected = jiff::Timestamp::now()
        .to_zoned(kiritimati)
        .date()
        .to_string();
    let history: Value = client
        .get(format!("http://{addr}/api/v1/agent/history"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(history["day"], expected);
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR fake but signed-by-bytes";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_upload_sign_verify_and_reappear_freshly_signed_in_history() {
    let server = common::start(
        &agwire_service::Config::default(),
        BuiltinAgent::default(),
        agwire_service::auth::Auth::none(),
    )
    .await;
    let addr = server.addr;
    let client = reqwest::Client::new();
    let uploads = format!("http://{addr}/api/v1/agent/attachments");
    let raw: Value = client
        .post(&uploads)
        .header("content-type", "image/png")
        .body(PNG)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(raw["mimeType"], "image/png");
    assert_eq!(raw["size"], PNG.len());
    let url = raw["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with(&server.attachment_urls()), "{url}");
    // The URL serves the bytes (the service, or the bucket itself); a
    // tampered one is refused.
    let fetched = client.get(&url).send().await.unwrap();
    assert_eq!(fetched.status().as_u16(), 200);
    assert_eq!(fetched.headers()["content-type"], "image/png");
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), PNG);
    let tampered = common::with_later_expiry(&url);
    assert_eq!(
        client
            .get(&tampered)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    // Multipart with the file in field `file`.
    let boundary = "XyZ";
    let mut form = format!("--{boundary}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a.png\"\r\ncontent-type: image/png\r\n\r\n").into_bytes();
    form.extend_from_slice(PNG);
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let multipart = client
        .post(&uploads)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(multipart.status().as_u16(), 201);
    // Not an image by its bytes: refused, whatever the header says.
    let pdf = client
        .post(&uploads)
        .header("content-type", "image/png")
        .body("%PDF-1.7")
        .send()
        .await
        .unwrap();
    assert_eq!(pdf.status().as_u16(), 415);
    // In a bucket: the two images, and nothing of the refused upload.
    if server.bucket.is_some() {
        assert_eq!(server.objects().await.len(), 2);
    }

    // A run with the signed URL is accepted; history shows a freshly signed one.
    let thread = uuid::Uuid::new_v4().to_string();
    let run = with(
        body(&thread, "att-1", "x"),
        "/messages/0/content",
        json!([
            {"type": "text", "text": "what is this?"},
            {"type": "binary", "mimeType": "image/png", "url": url}
        ]),
    );
    assert_eq!(post(addr, &run, None).await.status().as_u16(), 202);
    // It ran to its end with the message's text (the built-in agent says
    // it back): a run whose image cannot be read ends in RUN_ERROR.
    let log = events(addr, "att-1", None).await;
    assert_valid_log(&log, &thread, "att-1");
    assert!(
        matches!(log.last(), Some((_, Event::RunFinished(_)))),
        "{log:?}"
    );
    assert_eq!(common::said(&log), "You said: what is this?");
    let history: Value = client
        .get(format!(
            "http://{addr}/api/v1/agent/history?threadId={thread}"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let attachments = history["messages"][0]["attachments"].as_array().unwrap();
    assert_eq!(attachments.len(), 1);
    assert_eq!(attachments[0]["mimeType"], "image/png");
    let fresh = attachments[0]["url"].as_str().unwrap();
    assert_eq!(
        client
            .get(fresh)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .as_ref(),
        PNG
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_every_endpoint_is_per_user() {
    use agwire_service::auth::{Auth, sign_jwt};
    let server = common::start(
        &agwire_service::Config::default(),
        BuiltinAgent::default(),
        Auth::jwt(b"test-secret".to_vec()),
    )
    .await;
    let addr = server.addr;

    let far = jiff::Timestamp::now().as_second() + 3600;
    let alice = format!("Bearer {}", sign_jwt(b"test-secret", "alice", far));
    let bob = format!("Bearer {}", sign_jwt(b"test-secret", "bob", far));
    let expired = format!("Bearer {}", sign_jwt(b"test-secret", "alice", 1));
    let forged = format!("Bearer {}", sign_jwt(b"wrong-secret", "alice", far));
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{addr}{path}");

    // Alice runs something on her thread.
    let thread = uuid::Uuid::new_v4().to_string();
    let accepted = client
        .post(url("/api/v1/agent/runs"))
        .header("authorization", &alice)
        .header("content-type", "application/json")
        .body(body(&thread, "secret-run", "hi").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status().as_u16(), 202);
    let upload: Value = client
        .post(url("/api/v1/agent/attachments"))
        .header("authorization", &alice)
        .body(PNG)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let alice_url = upload["url"].as_str().unwrap().to_owned();

    // Without a valid token: 401 everywhere.
    let endpoints: [(&str, String); 7] = [
        ("POST", "/api/v1/agent/runs".into()),
        ("GET", "/api/v1/agent/runs/secret-run".into()),
        ("GET", "/api/v1/agent/runs/secret-run/events".into()),
        ("POST", "/api/v1/agent/runs/secret-run/cancel".into()),
        ("GET", format!("/api/v1/agent/history?threadId={thread}")),
        ("GET", "/api/v1/me/profile".into()),
        ("POST", "/api/v1/agent/attachments".into()),
    ];
    // Every operation the API document does not mark public (`security:
    // []`): all but health, the document itself, and the signed attachment
    // GET, whose signature is its credential.
    let document: Value = client
        .get(url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut guarded: Vec<(String, String)> = Vec::new();
    let mut public: Vec<String> = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if operation["security"] == serde_json::json!([]) {
                public.push(path.clone());
            } else {
                guarded.push((method.to_uppercase(), path.replace("{runId}", "secret-run")));
            }
        }
    }
    public.sort();
    assert_eq!(
        public,
        [
            "/api/v1/agent/attachments/{id}",
            "/healthz",
            "/openapi.json"
        ]
    );
    assert_eq!(guarded.len(), 23);
    for token in [None, Some(expired.as_str()), Some(forged.as_str())] {
        for (method, path) in &guarded {
            let mut request = client.request(method.parse().unwrap(), url(path));
            if let Some(token) = token {
                request = request.header("authorization", token);
            }
            let response = request.send().await.unwrap();
            assert_eq!(
                response.status().as_u16(),
                401,
                "{method} {path} with {token:?}"
            );
            assert_eq!(response.headers()["www-authenticate"], "Bearer");
        }
    }
    // Bob sees none of Alice's things: 404, never 403 (existence is not revealed).
    for (method, path) in &endpoints[1..5] {
        let response = client
            .request(method.parse().unwrap(), url(path))
            .header("authorization", &bob)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 404, "bob {method} {path}");
    }
    let alices_thread = format!("/api/v1/agent/threads/{thread}");
    for method in ["GET", "PATCH", "DELETE"] {
        let response = client
            .request(method.parse().unwrap(), url(&alices_thread))
            .header("authorization", &bob)
            .header("content-type", "application/json")
            .body(r#"{"title": "mine now"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status().as_u16(),
            404,
            "bob {method} {alices_thread}"
        );
    }
    let bobs_list: Value = client
        .get(url("/api/v1/agent/threads"))
        .header("authorization", &bob)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bobs_list["threads"], json!([]), "{bobs_list}");
    let on_alices_thread = client
        .post(url("/api/v1/agent/runs"))
        .header("authorization", &bob)
        .header("content-type", "application/json")
        .body(body(&thread, "bob-run", "hi").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(on_alices_thread.status().as_u16(), 404);
    let agui_on_alices_thread = client
        .post(url("/api/v1/agui"))
        .header("authorization", &bob)
        .header("content-type", "application/json")
        .body(body(&thread, "bob-agui", "hi").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(agui_on_alices_thread.status().as_u16(), 404);
    // Alice's signed URL is not Bob's to attach.
    let bob_thread = uuid::Uuid::new_v4().to_string();
    let stolen = with(
        body(&bob_thread, "bob-run-2", "x"),
        "/messages/0/content",
        json!([{"type": "binary", "mimeType": "image/png", "url": alice_url}]),
    );
    let response = client
        .post(url("/api/v1/agent/runs"))
        .header("authorization", &bob)
        .header("content-type", "application/json")
        .body(stolen.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 422);
    assert_eq!(
        response.json::<Value>().await.unwrap()["detail"],
        "binary content url is not a valid signed URL"
    );
    // Bob's own history is empty; Alice's shows her run.
    let bobs: Value = client
        .get(url("/api/v1/agent/history"))
        .header("authorization", &bob)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bobs["threadId"], Value::Null);
    let alices = client
        .get(url("/api/v1/agent/runs/secret-run"))
        .header("authorization", &alice)
        .send()
        .await
        .unwrap();
    assert_eq!(alices.status().as_u16(), 200);
    // The signed URL itself needs no token: the signature is the credential.
    assert_eq!(
        client
            .get(&alice_url)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
}

/// A run of the local user, admitted by default rules.
fn new_run<'a>(input: &'a agwire_core::RunAgentInput, hash: &'a str, now_ms: i64) -> NewRun<'a> {
    NewRun {
        user: "local",
        input,
        request_hash: hash,
        mode: None,
        options: &RunOptions::NONE,
        admission: Admission::default(),
        quotas: Default::default(),
        now_ms,
        start: None,
    }
}

/// The store these suites run on, as the service itself reports it
/// (`/healthz`): the test command runs them on SQLite, then again with
/// `AGWIRE_TEST_STORE=postgres`, and this test's output says which ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_under_test_is_the_one_asked_for() {
    let server = common::start(
        &agwire_service::Config::default(),
        BuiltinAgent::default(),
        agwire_service::auth::Auth::none(),
    )
    .await;
    let health = common::get_json(server.addr, "/healthz").await;
    let asked = if common::on_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(health["database"], asked, "{health}");
    assert_eq!(server.database.postgres.is_some(), asked == "postgres");
    eprintln!(
        "the service suites run on {asked}: {}",
        server.database.describe()
    );
}

/// The bucket pass keeps attachments where it says: with
/// `AGWIRE_TEST_ATTACHMENTS=bucket` an upload is an object in the service's
/// bucket, served by the bucket's own presigned URL; without, it is served
/// by the service and no bucket exists. (Named `attachments_…` so that the
/// bucket pass's filter selects it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_kept_where_the_pass_asked() {
    let server = common::start(
        &agwire_service::Config::default(),
        BuiltinAgent::default(),
        agwire_service::auth::Auth::none(),
    )
    .await;
    let url = common::upload(server.addr, PNG).await;
    // Either kind of URL names the attachment last in its path.
    let id = url.split('?').next().unwrap().rsplit('/').next().unwrap();
    assert_eq!(server.bucket.is_some(), common::in_bucket());
    match &server.bucket {
        Some((weed, prefix)) => {
            assert!(url.starts_with(&format!("{}/", weed.endpoint)), "{url}");
            assert!(url.contains("X-Amz-Signature="), "{url}");
            assert_eq!(server.objects().await, vec![format!("{prefix}/{id}")]);
            eprintln!("attachments under test: the bucket {}", weed.endpoint);
        }
        None => {
            let own = format!("http://{}/api/v1/agent/attachments/{id}?", server.addr);
            assert!(url.starts_with(&own), "{url}");
            eprintln!("attachments under test: the service's own store");
        }
    }
}
