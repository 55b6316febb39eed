//! What the service refuses to an attacker: a web page on another site
//! driving the user's own no-auth service (cross-site requests, DNS
//! rebinding), one user's poisoned input failing another user's runs, and
//! requests whose work grows with what an attacker can store. Each test
//! fails on the behaviour the trust issue found (on a20bc6d4) and says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agwire_service::auth::{Auth, sign_jwt};
use agwire_service::{BuiltinAgent, Config};
use common::{body, start};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One HTTP/1.1 request written by hand (so that `Host`, `Origin` and the
/// rest are exactly what a browser would send); the status and JSON body of
/// the answer. Bounded: 30 s.
async fn send(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, Value) {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    tcp.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), tcp.read_to_end(&mut answer))
        .await
        .expect("no answer in 30 s")
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a response: {text:?}"));
    let json = text
        .split("\r\n\r\n")
        .nth(1)
        .and_then(|b| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

async fn jobs(addr: SocketAddr) -> usize {
    common::get_json(addr, "/api/v1/automation/jobs").await["jobs"]
        .as_array()
        .unwrap()
        .len()
}

const JOB: &str =
    r#"{"name":"x","schedule":{"every_seconds":60},"timezone":"UTC","prompt":"spend the key"}"#;

/// A page on another site POSTs to the user's own service with what a
/// browser sends without a preflight (`text/plain`, a form, `no-cors`):
/// refused, and nothing is written. On a20bc6d4 the first request below got
/// 201: a job spending the operator's LLM key every minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_site_cannot_change_anything() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let host = format!("host: 127.0.0.1:{}", addr.port());
    let evil = "origin: https://evil.example\r\nsec-fetch-site: cross-site";
    // fetch(url, {method: "POST", mode: "no-cors", body}) from evil.example.
    let (status, answer) = send(
        addr,
        &format!("POST /api/v1/automation/jobs HTTP/1.1\r\n{host}\r\n{evil}\r\ncontent-type: text/plain;charset=UTF-8"),
        JOB.as_bytes(),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .contains("https://evil.example"),
        "{answer}"
    );
    // An older browser that sends no Sec-Fetch-Site: its Origin says it.
    let (status, _) = send(
        addr,
        &format!("POST /api/v1/automation/jobs HTTP/1.1\r\n{host}\r\norigin: https://evil.example\r\ncontent-type: text/plain"),
        JOB.as_bytes(),
    )
    .await;
    assert_eq!(status, 403);
    // A multipart upload from a form on that site.
    let form = b"--b\r\ncontent-disposition: form-data; name=\"file\"; filename=\"x.png\"\r\ncontent-type: image/png\r\n\r\n\x89PNG\r\n\x1a\n\r\n--b--\r\n";
    let (status, _) = send(
        addr,
        &format!("POST /api/v1/agent/attachments HTTP/1.1\r\n{host}\r\n{evil}\r\ncontent-type: multipart/form-data; boundary=b"),
        form,
    )
    .await;
    assert_eq!(status, 403);
    // Cancels, renames, deletes, profile changes: every state change.
    for (method, path) in [
        ("POST", "/api/v1/agent/runs/r/cancel"),
        ("DELETE", "/api/v1/agent/threads/t"),
        ("PATCH", "/api/v1/me/profile"),
        ("POST", "/api/v1/agui"),
        ("POST", "/api/v1/agent/runs"),
    ] {
        let (status, answer) = send(
            addr,
            &format!(
                "{method} {path} HTTP/1.1\r\n{host}\r\n{evil}\r\ncontent-type: application/json"
            ),
            b"{}",
        )
        .await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
    }
    // Without a browser's headers (curl, an SDK), a JSON endpoint still
    // wants JSON: 415 before anything is read.
    let (status, answer) = send(
        addr,
        &format!("POST /api/v1/automation/jobs HTTP/1.1\r\n{host}\r\ncontent-type: text/plain"),
        JOB.as_bytes(),
    )
    .await;
    assert_eq!(
        (status, answer["detail"].as_str()),
        (415, Some("Content-Type must be application/json"))
    );
    for (method, path) in [
        ("PATCH", "/api/v1/me/profile"),
        ("PATCH", "/api/v1/agent/threads/t"),
    ] {
        let (status, _) = send(
            addr,
            &format!("{method} {path} HTTP/1.1\r\n{host}\r\ncontent-type: text/plain"),
            b"{}",
        )
        .await;
        assert_eq!(status, 415, "{method} {path}");
    }
    assert_eq!(jobs(addr).await, 0, "a refused request wrote a job");
    // The service's own web app (same origin) is served as before.
    let (status, answer) = send(
        addr,
        &format!(
            "POST /api/v1/automation/jobs HTTP/1.1\r\n{host}\r\norigin: http://127.0.0.1:{}\r\nsec-fetch-site: same-origin\r\ncontent-type: application/json",
            addr.port()
        ),
        JOB.as_bytes(),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(jobs(addr).await, 1);
}

/// An origin in the CORS allow-list may change state from its pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_origin_may_change_state() {
    let mut config = Config::default();
    config.http.cors_allowed_origins = vec!["https://app.example.com".into()];
    let server = start(&config, BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let (status, answer) = send(
        addr,
        &format!(
            "POST /api/v1/automation/jobs HTTP/1.1\r\nhost: 127.0.0.1:{}\r\norigin: https://app.example.com\r\nsec-fetch-site: cross-site\r\ncontent-type: application/json",
            addr.port()
        ),
        JOB.as_bytes(),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
}

/// A page whose name the attacker resolves to 127.0.0.1 sends its own name
/// in `Host`: refused without auth, so it reads nothing. On a20bc6d4 this
/// got 200 with the user's threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebound_name_reads_nothing() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let port = addr.port();
    let get = |host: String| async move {
        send(
            addr,
            &format!("GET /api/v1/agent/threads HTTP/1.1\r\nhost: {host}"),
            b"",
        )
        .await
    };
    let (status, answer) = get(format!("rebind.attacker.example:{port}")).await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .contains("rebind.attacker.example"),
        "{answer}"
    );
    for page in ["/", "/api/v1/agent/history", "/openapi.json"] {
        let (status, _) = send(
            addr,
            &format!("GET {page} HTTP/1.1\r\nhost: rebind.attacker.example:{port}"),
            b"",
        )
        .await;
        assert_eq!(status, 403, "{page}");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("app.localhost:{port}"),
    ] {
        assert_eq!(get(host.clone()).await.0, 200, "{host}");
    }

    // Names the operator lists, or the public URL's, are served.
    let mut config = Config::default();
    config.http.allowed_hosts = vec![".corp.example".into()];
    config.public_url = Some("https://chat.example.com".into());
    let listed = start(&config, BuiltinAgent::default(), Auth::none()).await;
    for (host, want) in [
        ("chat.example.com", 200),
        ("agents.corp.example:8080", 200),
        ("rebind.attacker.example", 403),
    ] {
        let (status, _) = send(
            listed.addr,
            &format!("GET /api/v1/agent/threads HTTP/1.1\r\nhost: {host}"),
            b"",
        )
        .await;
        assert_eq!(status, want, "{host}");
    }

    // With tokens, a page has nothing to send: any name is served.
    let secret = b"0123456789abcdef0123";
    let authed = start(
        &Config::default(),
        BuiltinAgent::default(),
        Auth::jwt(secret.to_vec()),
    )
    .await;
    let token = sign_jwt(secret, "alice", 4_000_000_000);
    let (status, answer) = send(
        authed.addr,
        &format!(
            "GET /api/v1/agent/threads HTTP/1.1\r\nhost: api.example.com\r\nauthorization: Bearer {token}"
        ),
        b"",
    )
    .await;
    assert_eq!(status, 200, "{answer}");
}

/// Two users post at once: one valid run each of 60, the other 60 runs
/// whose runId holds a NUL (which PostgreSQL cannot store). Every valid run
/// succeeds and every poisoned one is a 422 naming the field, on both
/// stores. On a20bc6d4 on PostgreSQL 47 of the 60 valid runs got 500: the
/// accepts were batched into one statement that PostgreSQL refused whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_poisoned_input_never_fails_anothers_runs() {
    let secret = b"0123456789abcdef0123";
    let server = start(
        &Config::default(),
        BuiltinAgent::default(),
        Auth::jwt(secret.to_vec()),
    )
    .await;
    let addr = server.addr;
    let alice = sign_jwt(secret, "alice", 4_000_000_000);
    let mallory = sign_jwt(secret, "mallory", 4_000_000_000);
    let client = reqwest::Client::new();
    let mut posts = Vec::new();
    for i in 0..60 {
        for (token, run_id) in [
            (&alice, format!("valid-{i}")),
            (&mallory, format!("bad-{i}\u{0}")),
        ] {
            let request = client
                .post(format!("http://{addr}/api/v1/agui"))
                .bearer_auth(token)
                .header("accept", "text/event-stream")
                .json(&json!({
                    "threadId": uuid::Uuid::new_v4().to_string(), "runId": run_id,
                    "state": {}, "tools": [], "context": [], "forwardedProps": {},
                    "messages": [{"id": format!("u{i}"), "role": "user", "content": "hi"}]
                }));
            posts.push((
                run_id,
                tokio::spawn(async move {
                    let answer = request.send().await.unwrap();
                    let status = answer.status().as_u16();
                    (status, answer.text().await.unwrap())
                }),
            ));
        }
    }
    let deadline = Duration::from_secs(120);
    let mut failed = Vec::new();
    for (run_id, post) in posts {
        let (status, text) = tokio::time::timeout(deadline, post)
            .await
            .expect("a post took over 2 minutes")
            .unwrap();
        if run_id.starts_with("valid") {
            if status != 200 || !text.contains("RUN_FINISHED") {
                failed.push(format!("{run_id}: {status} {text}"));
            }
        } else {
            assert_eq!(status, 422, "{run_id:?}: {text}");
            assert!(
                text.contains("/runId must not contain the NUL character"),
                "{text}"
            );
        }
    }
    assert!(failed.is_empty(), "valid runs failed: {failed:#?}");

    // The agent-run API and every other JSON endpoint say the same.
    let thread = uuid::Uuid::new_v4().to_string();
    let mut poisoned = body(&thread, "r1", "hi");
    poisoned["messages"][0]["content"] = json!("a\u{0}b");
    let answer = client
        .post(format!("http://{addr}/api/v1/agent/runs"))
        .bearer_auth(&mallory)
        .json(&poisoned)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 422);
    let detail: Value = answer.json().await.unwrap();
    assert_eq!(
        detail["detail"],
        "invalid RunAgentInput: /messages/0/content must not contain the NUL character (U+0000)"
    );
    for (method, path, json) in [
        (
            "PATCH",
            "/api/v1/me/profile".to_owned(),
            json!({"settings": {"nick\u{0}": "x"}}),
        ),
        (
            "POST",
            "/api/v1/automation/jobs".to_owned(),
            json!({"name": "a\u{0}", "schedule": {"every_seconds": 60}, "timezone": "UTC", "prompt": "p"}),
        ),
        (
            "PATCH",
            format!("/api/v1/agent/threads/{thread}"),
            json!({"title": "t\u{0}"}),
        ),
    ] {
        let answer = client
            .request(method.parse().unwrap(), format!("http://{addr}{path}"))
            .bearer_auth(&mallory)
            .json(&json)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 422, "{method} {path}");
        let detail: Value = answer.json().await.unwrap();
        assert!(
            detail["detail"].as_str().unwrap().contains("NUL character"),
            "{detail}"
        );
    }
    // And a NUL in the URL is never a store lookup.
    for path in [
        "/api/v1/agent/threads/t%00",
        "/api/v1/agent/runs/r%00",
        "/api/v1/agent/history?threadId=a%00",
        "/api/v1/automation/jobs/j%00",
    ] {
        let answer = client
            .get(format!("http://{addr}{path}"))
            .bearer_auth(&mallory)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{path}");
    }
}

/// Deleting a thread whose messages name thousands of attachment-like ids
/// is one indexed write: it never scans the owner's other messages under
/// the write lock. On a20bc6d4 each of the ids below cost a `LIKE` scan of
/// every other message of the user (here 16 MiB) inside the delete's
/// transaction: minutes holding SQLite's write lock, past every other
/// writer's 10 s wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_thread_reads_no_other_message() {
    let mut config = Config::default();
    config.runs.agui_max_payload_bytes = 2 * 1024 * 1024;
    let server = start(&config, BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let client = reqwest::Client::new();
    let agui = |thread: String, run_id: String, text: String| {
        let request = client
            .post(format!("http://{addr}/api/v1/agui"))
            .header("accept", "text/event-stream")
            .json(&json!({
                "threadId": thread, "runId": run_id, "state": {}, "tools": [],
                "context": [], "forwardedProps": {},
                "messages": [{"id": format!("{run_id}-u"), "role": "user", "content": text}]
            }));
        async move {
            let answer = request.send().await.unwrap();
            assert_eq!(answer.status(), 200);
            answer.text().await.unwrap();
        }
    };
    // Other threads of the same user: 16 messages of 1 MiB.
    for i in 0..16 {
        agui(
            uuid::Uuid::new_v4().to_string(),
            format!("big-{i}"),
            "x".repeat(1024 * 1024 - 64),
        )
        .await;
    }
    // The thread to delete names 20,000 attachment-like ids in its text.
    let doomed = uuid::Uuid::new_v4().to_string();
    let ids: String = (0..20_000)
        .map(|_| format!("attachment:{} ", uuid::Uuid::new_v4()))
        .collect();
    agui(doomed.clone(), "doomed".into(), ids).await;
    let started = Instant::now();
    let delete = client
        .delete(format!("http://{addr}/api/v1/agent/threads/{doomed}"))
        .send();
    // Another thread's run meanwhile is accepted and runs.
    let other = uuid::Uuid::new_v4().to_string();
    let run = agui(other, "meanwhile".into(), "hi".into());
    let (deleted, ()) =
        tokio::time::timeout(Duration::from_secs(60), async { tokio::join!(delete, run) })
            .await
            .expect("deleting the thread (or a run beside it) took over a minute");
    let deleted = deleted.unwrap();
    assert_eq!(deleted.status(), 204, "{:?}", deleted.text().await);
    eprintln!("deleted in {:?}", started.elapsed());
}
