//! Per-user quotas (`[quotas]`) over real HTTP, on the store the suite runs
//! on: past a quota a run is refused with 429 `quota exceeded: …` and
//! `Retry-After`, on both run endpoints, before anything is written; another
//! user is not held to the first one's count; `GET /api/v1/me/usage` shows
//! the counts the accept checks.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use crate::common;

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::sync::Arc;

use agwire_llm::{ChatModel, ScriptedModel, ScriptedReply};
use agwire_service::auth::{Auth, sign_jwt};
use agwire_service::brain::llm::LlmBrain;
use agwire_service::{BuiltinAgent, Config};
use common::{body, get_json, post, wait_status};
use serde_json::{Value, json};

async fn post_as(addr: SocketAddr, path: &str, body: &Value, token: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .bearer_auth(token)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

async fn usage_of(addr: SocketAddr, token: &str) -> Value {
    reqwest::Client::new()
        .get(format!("http://{addr}/api/v1/me/usage"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// `Retry-After` in seconds, checked to be within `range`.
fn retry_after(response: &reqwest::Response, range: std::ops::RangeInclusive<u64>) -> u64 {
    let seconds: u64 = response
        .headers()
        .get("retry-after")
        .expect("a 429 says when to retry")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(range.contains(&seconds), "Retry-After: {seconds}");
    seconds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_minute_quota_is_429_with_retry_after_and_writes_nothing() {
    let mut config = Config::default();
    config.quotas.runs_per_minute = NonZeroU32::new(2);
    let secret = b"quota-test-secret-0123456789";
    let server = common::start(&config, BuiltinAgent::default(), Auth::jwt(secret.to_vec())).await;
    let addr = server.addr;
    let alice = sign_jwt(secret, "alice", 4_000_000_000);
    let bob = sign_jwt(secret, "bob", 4_000_000_000);
    let threads: Vec<String> = (0..4).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    for (i, thread) in threads[..2].iter().enumerate() {
        let accepted = post_as(
            addr,
            "/api/v1/agent/runs",
            &body(thread, &format!("a{i}"), "hi"),
            &alice,
        )
        .await;
        assert_eq!(accepted.status(), 202);
    }
    let refused = post_as(
        addr,
        "/api/v1/agent/runs",
        &body(&threads[2], "a2", "one too many"),
        &alice,
    )
    .await;
    assert_eq!(refused.status(), 429);
    retry_after(&refused, 1..=60);
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        json!({"detail": "quota exceeded: 2 runs per minute"})
    );
    // The standard endpoint counts the same runs.
    let agui = post_as(
        addr,
        "/api/v1/agui",
        &json!({"threadId": threads[3], "runId": "g1", "state": {}, "tools": [], "context": [],
                "messages": [{"id": "m1", "role": "user", "content": "hi"}], "forwardedProps": {}}),
        &alice,
    )
    .await;
    assert_eq!(agui.status(), 429);
    retry_after(&agui, 1..=60);
    // Nothing of the refused runs was written.
    for (path, what) in [
        (format!("/api/v1/agent/threads/{}", threads[2]), "thread"),
        (format!("/api/v1/agent/threads/{}", threads[3]), "thread"),
        ("/api/v1/agent/runs/a2".to_owned(), "run"),
    ] {
        let missing = reqwest::Client::new()
            .get(format!("http://{addr}{path}"))
            .bearer_auth(&alice)
            .send()
            .await
            .unwrap();
        assert_eq!(missing.status(), 404, "{what} {path}");
    }
    // A re-post of an accepted run is answered again.
    let again = post_as(
        addr,
        "/api/v1/agent/runs",
        &body(&threads[0], "a0", "hi"),
        &alice,
    )
    .await;
    assert_eq!(again.status(), 202);
    // Bob has a minute of his own.
    let bobs = post_as(
        addr,
        "/api/v1/agent/runs",
        &body(&uuid::Uuid::new_v4().to_string(), "b0", "hi"),
        &bob,
    )
    .await;
    assert_eq!(bobs.status(), 202);

    let usage = usage_of(addr, &alice).await;
    assert_eq!(usage["runs"], json!({"lastMinute": 2, "perMinute": 2}));
    // No tokens quota: not counted.
    assert_eq!(usage["tokens"]["perDay"], Value::Null);
    assert_eq!(usage["tokens"]["today"], Value::Null);
    let resets: jiff::Timestamp = usage["tokens"]["resetsAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(resets.as_second() % 86_400, 0, "midnight UTC: {usage}");
    assert_eq!(usage_of(addr, &bob).await["runs"]["lastMinute"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_day_s_tokens_come_from_the_runs_usage_and_refuse_until_midnight() {
    // The router's answer and the worker's, each with its usage (10 prompt
    // tokens, one a word).
    let model = ScriptedModel::new(|request| {
        if request.json_mode {
            ScriptedReply::text(r#"{"agent": "general"}"#)
        } else {
            ScriptedReply::text("Hello there!")
        }
    });
    let model: Arc<dyn ChatModel> = Arc::new(model);
    let brain = Arc::new(LlmBrain::new(model.clone(), model));
    let mut config = Config::default();
    config.quotas.tokens_per_day = NonZeroU64::new(20);
    let server = common::start_brain_with(&config, Auth::none(), brain).await;
    let addr = server.addr;
    assert_eq!(
        get_json(addr, "/api/v1/me/usage").await["tokens"]["today"],
        0
    );
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post(addr, &body(&thread, "t1", "hi"), None).await.status(),
        202
    );
    let run = wait_status(addr, "t1", "succeeded").await;
    let used: u64 = run["usage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["totalTokens"].as_u64().unwrap())
        .sum();
    assert!(used >= 20, "{run}");
    let usage = get_json(addr, "/api/v1/me/usage").await;
    assert_eq!(usage["tokens"]["today"], used, "{usage}");
    assert_eq!(usage["tokens"]["perDay"], 20);

    let refused = post(addr, &body(&thread, "t2", "again"), None).await;
    assert_eq!(refused.status(), 429);
    retry_after(&refused, 1..=86_400);
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        json!({"detail": "quota exceeded: 20 tokens per day"})
    );
    assert_eq!(
        common::history(addr, &thread).await.len(),
        2,
        "the refused turn is not in the thread"
    );
}
