//! Per-run multitask strategies (`?multitask_strategy=`) over real HTTP, on
//! both run endpoints and on the store the suite runs on: an interrupted
//! run's stream ends cancelled and the new run runs; a rollback leaves the
//! thread as it was before the stopped run; an unknown strategy is 422 and
//! stores nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use agwire_client::core::RunFinishedOutcome;
use agwire_service::auth::Auth;
use agwire_service::{BuiltinAgent, Config};
use common::{body, events, history, outcome, post, said, start, status, wait_status};
use serde_json::{Value, json};

/// 78 words: seconds of answer at 40 ms a word, however loaded the machine.
const LONG: &str = "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z";

fn slow() -> BuiltinAgent {
    BuiltinAgent::with_token_delay(Duration::from_millis(40))
}

async fn post_to(addr: SocketAddr, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

fn turn(user: &str, answer: &str) -> [(String, String); 2] {
    [
        ("user".into(), user.into()),
        ("assistant".into(), answer.into()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_cancels_the_running_run_keeps_what_it_said_and_runs_the_new_one() {
    let server = start(&Config::default(), slow(), Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post(addr, &body(&thread, "a", LONG), None).await.status(),
        202
    );
    common::wait_for_text(addr, "a").await;

    let b = post_to(
        addr,
        "/api/v1/agent/runs?multitask_strategy=interrupt",
        &body(&thread, "b", "second"),
    )
    .await;
    assert_eq!(b.status(), 202);
    let a_log = events(addr, "a", None).await;
    assert_eq!(outcome(&a_log), Some(RunFinishedOutcome::Cancelled));
    let partial = said(&a_log);
    assert!(
        partial.len() < format!("You said: {LONG}").len(),
        "{partial}"
    );
    let b_log = events(addr, "b", None).await;
    assert_eq!(outcome(&b_log), None);
    assert_eq!(said(&b_log), "You said: second");
    assert_eq!(status(addr, "a").await["status"], "cancelled");
    assert_eq!(
        wait_status(addr, "b", "succeeded").await["status"],
        "succeeded"
    );
    // What the interrupted run said stays, before the new turn.
    let mut expected = turn(LONG, &partial).to_vec();
    expected.extend(turn("second", "You said: second"));
    assert_eq!(history(addr, &thread).await, expected);

    // A re-post of the interrupting request is its acceptance again; it
    // stops nothing (the thread's run now is b's, finished).
    let again = post_to(
        addr,
        "/api/v1/agent/runs?multitask_strategy=interrupt",
        &body(&thread, "b", "second"),
    )
    .await;
    assert_eq!(again.status(), 202);
    assert_eq!(history(addr, &thread).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_leaves_the_thread_as_before_the_stopped_run() {
    let server = start(&Config::default(), slow(), Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post(addr, &body(&thread, "z", "hello"), None)
            .await
            .status(),
        202
    );
    wait_status(addr, "z", "succeeded").await;
    let before = history(addr, &thread).await;
    assert_eq!(before, turn("hello", "You said: hello"));

    assert_eq!(
        post(addr, &body(&thread, "a", LONG), None).await.status(),
        202
    );
    common::wait_for_text(addr, "a").await;
    let b = post_to(
        addr,
        "/api/v1/agent/runs?multitask_strategy=rollback",
        &body(&thread, "b", "instead"),
    )
    .await;
    assert_eq!(b.status(), 202);
    let a_log = events(addr, "a", None).await;
    assert_eq!(outcome(&a_log), Some(RunFinishedOutcome::Cancelled));
    assert!(!said(&a_log).is_empty());
    wait_status(addr, "b", "succeeded").await;
    let mut expected = before.clone();
    expected.extend(turn("instead", "You said: instead"));
    assert_eq!(history(addr, &thread).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_endpoint_takes_the_strategy_too() {
    let server = start(&Config::default(), slow(), Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    let run = |run_id: &str, messages: Value| {
        json!({"threadId": thread, "runId": run_id, "state": {}, "messages": messages,
               "tools": [], "context": [], "forwardedProps": {}})
    };
    let first = json!({"id": "m1", "role": "user", "content": LONG});
    // The first run's own stream, read to its end on a task of its own.
    let a = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/agui"))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(run("a", json!([first])).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(a.status(), 200);
    let a_stream = tokio::spawn(async move {
        tokio::time::timeout(Duration::from_secs(120), a.bytes())
            .await
            .expect("a's stream ends within 120 s")
            .unwrap()
    });
    common::wait_for_text(addr, "a").await;
    let second = json!({"id": "m2", "role": "user", "content": "second"});
    let b = post_to(
        addr,
        "/api/v1/agui?multitask_strategy=interrupt",
        &run("b", json!([first, second])),
    )
    .await;
    assert_eq!(b.status(), 200);
    let b_log = common::sse_with_ids(&b.bytes().await.unwrap());
    assert_eq!(outcome(&b_log), None);
    let a_log = common::sse_with_ids(&a_stream.await.unwrap());
    assert_eq!(outcome(&a_log), Some(RunFinishedOutcome::Cancelled));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_strategy_is_422_and_stores_nothing() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    let detail =
        json!({"detail": "multitask_strategy must be one of reject, enqueue, interrupt, rollback"});
    for path in [
        "/api/v1/agent/runs?multitask_strategy=later",
        "/api/v1/agent/runs?multitask_strategy=",
        "/api/v1/agent/runs?multitask_strategy=Interrupt",
        "/api/v1/agui?multitask_strategy=later",
    ] {
        let refused = post_to(addr, path, &body(&thread, "r", "hi")).await;
        assert_eq!(refused.status(), 422, "{path}");
        assert_eq!(refused.json::<Value>().await.unwrap(), detail, "{path}");
    }
    let missing = reqwest::get(format!("http://{addr}/api/v1/agent/runs/r"))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // `reject` says what the default says.
    assert_eq!(
        post_to(
            addr,
            "/api/v1/agent/runs?multitask_strategy=reject",
            &body(&thread, "r", "hi")
        )
        .await
        .status(),
        202
    );
}
