//! Multitask strategies across two `agwire serve` replicas on one
//! PostgreSQL database: an interrupt posted to the replica that does not
//! execute the running run stops it there; two interrupting posts at once on
//! the two replicas leave exactly one new run; a rollback through the other
//! replica leaves the thread as before; two rejecting posts at once on an
//! idle thread accept exactly one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::time::{Duration, Instant};

use agwire_client::core::Event;
use agwire_testkit::pg::PgDatabase;
use serde_json::Value;

use crate::common;
use common::{body, checked_log, data_dir, get, serve, wait_final};

/// 52 words at 40 ms: two seconds of answer for the second post to land in.
const LONG: &str = "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z";

async fn post_with(client: &reqwest::Client, base: &str, strategy: &str, body: &Value) -> u16 {
    client
        .post(format!(
            "{base}/api/v1/agent/runs?multitask_strategy={strategy}"
        ))
        .json(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn wait_running(client: &reqwest::Client, base: &str, run: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = get(client, base, &format!("/api/v1/agent/runs/{run}")).await;
        if status["status"] == "running" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{run} not running within 30 s: {status}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn cancelled(log: &[Event]) -> bool {
    matches!(
        log.last(),
        Some(Event::RunFinished(finished))
            if finished.outcome == Some(agwire_client::core::RunFinishedOutcome::Cancelled)
    )
}

async fn user_messages(client: &reqwest::Client, base: &str, thread: &str) -> Vec<String> {
    let snapshot = get(
        client,
        base,
        &format!("/api/v1/agent/history?threadId={thread}"),
    )
    .await;
    snapshot["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_hold_the_multitask_strategies() {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let env = [("AGWIRE_DATABASE_URL", database.url.as_str())];
    let replicas: Vec<_> = (0..2)
        .map(|_| {
            serve(
                &data_dir("multitask"),
                &["--builtin-token-delay-ms", "40"],
                &env,
            )
        })
        .collect();
    let (one, two) = (replicas[0].base.clone(), replicas[1].base.clone());
    let client = reqwest::Client::new();

    for round in 0..3 {
        // A runs on replica one (its accept started it there).
        let thread = uuid::Uuid::new_v4().to_string();
        let (a, b, c) = (
            format!("a{round}"),
            format!("b{round}"),
            format!("c{round}"),
        );
        assert_eq!(
            post_with(&client, &one, "reject", &body(&thread, &a, LONG)).await,
            202
        );
        wait_running(&client, &one, &a).await;
        // Two interrupts at once, one on each replica.
        let (left, right) = (body(&thread, &b, "left"), body(&thread, &c, "right"));
        let (b_status, c_status) = tokio::join!(
            post_with(&client, &one, "interrupt", &left),
            post_with(&client, &two, "interrupt", &right),
        );
        assert_eq!((b_status, c_status), (202, 202), "round {round}");
        // A's stream, read from the replica that does not execute it, ends
        // cancelled.
        let a_log = checked_log(&client, &two, &thread, &a).await;
        assert!(cancelled(&a_log), "round {round}: {a_log:?}");
        let (b_end, c_end) = (
            wait_final(&client, &two, &b).await,
            wait_final(&client, &one, &c).await,
        );
        let mut ends = [
            b_end["status"].as_str().unwrap().to_owned(),
            c_end["status"].as_str().unwrap().to_owned(),
        ];
        ends.sort();
        assert_eq!(
            ends,
            ["cancelled", "succeeded"],
            "round {round}: {b_end} {c_end}"
        );
        let (ran, left_out, left_out_end) = if b_end["status"] == "succeeded" {
            ("left", "right", &c_end)
        } else {
            ("right", "left", &b_end)
        };
        // The one left out joined the thread only if it had started when
        // the other stopped it (a waiting run is cancelled before its
        // message joins; a running one keeps what it said: docs/API.md) —
        // which of the two depends on how the posts raced.
        let users = user_messages(&client, &one, &thread).await;
        if left_out_end["startedAt"].is_null() {
            assert_eq!(users, [LONG, ran], "round {round}: {left_out} never joined");
        } else {
            assert_eq!(
                users,
                [LONG, left_out, ran],
                "round {round}: {left_out} started, then {ran} stopped it: {left_out_end}"
            );
        }
    }

    // A rollback through the other replica: the thread reads as before A.
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post_with(&client, &one, "reject", &body(&thread, "r0", "hello")).await,
        202
    );
    assert_eq!(wait_final(&client, &one, "r0").await["status"], "succeeded");
    assert_eq!(
        post_with(&client, &one, "reject", &body(&thread, "r1", LONG)).await,
        202
    );
    wait_running(&client, &one, "r1").await;
    assert_eq!(
        post_with(&client, &two, "rollback", &body(&thread, "r2", "instead")).await,
        202
    );
    assert!(cancelled(&checked_log(&client, &two, &thread, "r1").await));
    assert_eq!(wait_final(&client, &two, "r2").await["status"], "succeeded");
    assert_eq!(
        user_messages(&client, &two, &thread).await,
        ["hello", "instead"]
    );

    // Two rejecting posts at once on an idle thread: exactly one accepted.
    for round in 0..5 {
        let thread = uuid::Uuid::new_v4().to_string();
        let (x, y) = (format!("x{round}"), format!("y{round}"));
        let (first, second) = (body(&thread, &x, LONG), body(&thread, &y, LONG));
        let answers = tokio::join!(
            post_with(&client, &one, "reject", &first),
            post_with(&client, &two, "reject", &second),
        );
        let mut answers = [answers.0, answers.1];
        answers.sort_unstable();
        assert_eq!(answers, [202, 409], "round {round}");
    }
}
