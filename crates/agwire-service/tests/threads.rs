//! `/api/v1/agent/threads` over real HTTP (issue 27): the list in pages,
//! renames, owner checks between two signed-in users, and a delete that
//! cancels the thread's running run before it removes the thread. The rules
//! each backend keeps are `store_contract.rs`'s; this suite runs on SQLite,
//! or PostgreSQL with `AGWIRE_TEST_STORE=postgres`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use agwire_client::core::{Event, RunFinishedOutcome};
use agwire_service::auth::{Auth, sign_jwt};
use agwire_service::{BuiltinAgent, Config};
use common::{body, sse_with_ids, start, wait_for_text, wait_status};
use serde_json::{Value, json};

const SECRET: &[u8] = b"threads-suite-secret-of-32-bytes!";

fn token(user: &str) -> String {
    sign_jwt(SECRET, user, jiff::Timestamp::now().as_second() + 600)
}

/// A request as `user`.
fn call(
    method: reqwest::Method,
    addr: SocketAddr,
    path: &str,
    user: &str,
) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(method, format!("http://{addr}{path}"))
        .bearer_auth(token(user))
}

async fn json_of(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status().as_u16(), status, "{response:?}");
    response.json().await.unwrap()
}

async fn run(addr: SocketAddr, user: &str, thread: &str, run_id: &str, text: &str) {
    let response = call(reqwest::Method::POST, addr, "/api/v1/agent/runs", user)
        .json(&body(thread, run_id, text))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 202, "{run_id}");
}

async fn finished(addr: SocketAddr, user: &str, run_id: &str) {
    // The run's stream ends with its terminal event: read it to the end.
    let response = call(
        reqwest::Method::GET,
        addr,
        &format!("/api/v1/agent/runs/{run_id}/events"),
        user,
    )
    .header("accept", "text/event-stream")
    .send()
    .await
    .unwrap();
    let bytes = tokio::time::timeout(Duration::from_secs(30), response.bytes())
        .await
        .unwrap_or_else(|_| panic!("{run_id} never finished"))
        .unwrap();
    assert!(
        matches!(
            sse_with_ids(&bytes).last(),
            Some((_, Event::RunFinished(_)))
        ),
        "{run_id} did not finish"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_are_listed_in_pages_renamed_and_each_users_own() {
    let server = start(
        &Config::default(),
        BuiltinAgent::default(),
        Auth::jwt(SECRET.to_vec()),
    )
    .await;
    let addr = server.addr;
    let threads: Vec<String> = (0..3).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    for (i, thread) in threads.iter().enumerate() {
        let run_id = format!("list-{i}");
        run(
            addr,
            "alice",
            thread,
            &run_id,
            &format!("Question {i}\nwith details"),
        )
        .await;
        finished(addr, "alice", &run_id).await;
    }
    let bobs = uuid::Uuid::new_v4().to_string();
    run(addr, "bob", &bobs, "bob-1", "bob's question").await;

    let page = json_of(
        call(
            reqwest::Method::GET,
            addr,
            "/api/v1/agent/threads?limit=2",
            "alice",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    let ids: Vec<&str> = page["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["threadId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [threads[2].as_str(), threads[1].as_str()], "{page}");
    let first = &page["threads"][0];
    assert_eq!(first["title"], "Question 2", "{first}");
    assert_eq!(first["titleSet"], false);
    assert_eq!(first["activeRunId"], Value::Null);
    assert_eq!(first["automationJobId"], Value::Null);
    assert!(
        first["lastActiveAt"]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .is_ok(),
        "{first}"
    );
    let cursor = page["nextCursor"].as_str().unwrap();
    let rest = json_of(
        call(
            reqwest::Method::GET,
            addr,
            &format!("/api/v1/agent/threads?limit=2&cursor={cursor}"),
            "alice",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(rest["threads"].as_array().unwrap().len(), 1, "{rest}");
    assert_eq!(rest["threads"][0]["threadId"], threads[0].as_str());
    assert_eq!(rest["nextCursor"], Value::Null);
    for bad in ["limit=0", "limit=101", "limit=x", "cursor=nope"] {
        let refused = json_of(
            call(
                reqwest::Method::GET,
                addr,
                &format!("/api/v1/agent/threads?{bad}"),
                "alice",
            )
            .send()
            .await
            .unwrap(),
            422,
        )
        .await;
        assert!(refused["detail"].is_string(), "{bad}: {refused}");
    }

    // Rename, and back.
    let path = format!("/api/v1/agent/threads/{}", threads[0]);
    let renamed = json_of(
        call(reqwest::Method::PATCH, addr, &path, "alice")
            .json(&json!({"title": "  Trip to Kyoto "}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        (renamed["title"].as_str(), renamed["titleSet"].as_bool()),
        (Some("Trip to Kyoto"), Some(true))
    );
    for (patch, detail) in [
        (json!({"title": ""}), "title must be 1 to 200 characters"),
        (
            json!({"title": "a\nb"}),
            "title must be one line (no line breaks or control characters)",
        ),
        (json!({"title": 3}), "title must be a string or null"),
        (json!({"name": "x"}), "unknown thread field 'name'"),
        (json!({}), "title is required"),
    ] {
        let refused = json_of(
            call(reqwest::Method::PATCH, addr, &path, "alice")
                .json(&patch)
                .send()
                .await
                .unwrap(),
            422,
        )
        .await;
        assert_eq!(refused, json!({"detail": detail}), "{patch}");
    }
    let detail = json_of(
        call(reqwest::Method::GET, addr, &path, "alice")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(detail["title"], "Trip to Kyoto");
    assert_eq!(detail["pendingToolCalls"], json!([]));
    let back = json_of(
        call(reqwest::Method::PATCH, addr, &path, "alice")
            .json(&json!({"title": null}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        (back["title"].as_str(), back["titleSet"].as_bool()),
        (Some("Question 0"), Some(false))
    );

    // Bob sees none of it, and can change none of it.
    let his = json_of(
        call(reqwest::Method::GET, addr, "/api/v1/agent/threads", "bob")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(his["threads"].as_array().unwrap().len(), 1, "{his}");
    assert_eq!(his["threads"][0]["threadId"], bobs.as_str());
    for method in [
        reqwest::Method::GET,
        reqwest::Method::PATCH,
        reqwest::Method::DELETE,
    ] {
        let refused = json_of(
            call(method.clone(), addr, &path, "bob")
                .json(&json!({"title": "mine"}))
                .send()
                .await
                .unwrap(),
            404,
        )
        .await;
        assert_eq!(refused, json!({"detail": "thread not found"}), "{method}");
    }
    let still = json_of(
        call(reqwest::Method::GET, addr, &path, "alice")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(still["title"], "Question 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_thread_cancels_its_running_run_then_removes_it() {
    // Twenty words at 100 ms: two seconds of running run to delete under.
    let slow = BuiltinAgent::with_token_delay(Duration::from_millis(100));
    let server = start(&Config::default(), slow, Auth::none()).await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    let kept = uuid::Uuid::new_v4().to_string();
    common::post(addr, &body(&kept, "kept-1", "stay"), None).await;
    wait_status(addr, "kept-1", "succeeded").await;
    let words = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty";
    assert_eq!(
        common::post(addr, &body(&thread, "doomed", words), None)
            .await
            .status()
            .as_u16(),
        202
    );
    wait_for_text(addr, "doomed").await;
    let listed = common::get_json(addr, "/api/v1/agent/threads").await;
    assert_eq!(listed["threads"][0]["activeRunId"], "doomed", "{listed}");

    // Someone follows the run while the thread is deleted. The delete waits
    // until the follower has its stream and the run's first events: a delete
    // before that would be answered 404, which is not what this test is about.
    let (following, followed) = tokio::sync::oneshot::channel();
    let follower = tokio::spawn(async move {
        let mut response = reqwest::Client::new()
            .get(format!("http://{addr}/api/v1/agent/runs/doomed/events"))
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{response:?}");
        let mut bytes = tokio::time::timeout(Duration::from_secs(60), response.chunk())
            .await
            .unwrap()
            .unwrap()
            .expect("the run's first events")
            .to_vec();
        following.send(()).unwrap();
        while let Some(chunk) = tokio::time::timeout(Duration::from_secs(60), response.chunk())
            .await
            .unwrap()
            .unwrap()
        {
            bytes.extend_from_slice(&chunk);
        }
        sse_with_ids(&bytes)
    });
    tokio::time::timeout(Duration::from_secs(60), followed)
        .await
        .unwrap()
        .unwrap();
    let deleted = reqwest::Client::new()
        .delete(format!("http://{addr}/api/v1/agent/threads/{thread}"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    let log = tokio::time::timeout(Duration::from_secs(60), follower)
        .await
        .unwrap()
        .unwrap();
    match log.last() {
        Some((_, Event::RunFinished(end))) => {
            assert_eq!(end.outcome, Some(RunFinishedOutcome::Cancelled));
        }
        other => panic!("the follower did not see the run end cancelled: {other:?}"),
    }

    // Gone everywhere; the other thread untouched.
    for path in [
        format!("/api/v1/agent/threads/{thread}"),
        "/api/v1/agent/runs/doomed".to_owned(),
        format!("/api/v1/agent/history?threadId={thread}"),
    ] {
        let response = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
        assert_eq!(response.status().as_u16(), 404, "{path}");
    }
    let listed = common::get_json(addr, "/api/v1/agent/threads").await;
    let ids: Vec<&str> = listed["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["threadId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [kept.as_str()]);
    let history = common::get_json(addr, &format!("/api/v1/agent/history?threadId={kept}")).await;
    assert_eq!(
        history["messages"].as_array().unwrap().len(),
        2,
        "{history}"
    );
    // A second delete: nothing there.
    let again = reqwest::Client::new()
        .delete(format!("http://{addr}/api/v1/agent/threads/{thread}"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 404);
}
