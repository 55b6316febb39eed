//! Automation jobs over HTTP: create/read/update/delete with checked
//! fields, per-user; the scheduler driven by a controllable clock fires each
//! tick exactly once — again after a restart, and with two schedulers
//! (replicas) on one database.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use agwire_service::auth::Auth;
use agwire_service::{BuiltinAgent, Config, Service};
use common::{start, wait_status};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

async fn send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client.request(method.parse().unwrap(), url);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_created_checked_updated_and_deleted() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let base = format!("http://{}/api/v1/automation/jobs", server.addr);
    let client = reqwest::Client::new();
    let job = json!({
        "name": "Morning brief", "schedule": {"cron": "0 9 * * 1-5"},
        "timezone": "America/Los_Angeles", "prompt": "What is on my calendar today?",
        "config": {"agent": "calendar", "enabled_tools": ["calendar_read"]}
    });
    for (field, bad, message) in [
        (
            "schedule",
            json!({"cron": "61 * * * *"}),
            "invalid schedule: cron '61 * * * *': Component error: Number out of bounds.",
        ),
        (
            "schedule",
            json!({"every_seconds": 5}),
            "invalid schedule: every_seconds must be at least 60",
        ),
        (
            "schedule",
            json!("daily"),
            "schedule must be {\"cron\": \"m h dom mon dow\"} or {\"every_seconds\": n}",
        ),
        (
            "timezone",
            json!("Mars/Base"),
            "timezone must be an IANA time zone",
        ),
        ("prompt", json!(""), "prompt must be 1 to 10000 characters"),
        (
            "name",
            json!("x".repeat(201)),
            "name must be 1 to 200 characters",
        ),
        (
            "config",
            json!({"agent": "nobody"}),
            "invalid config: configuration: unknown agent 'nobody'",
        ),
        ("colour", json!("red"), "unknown job field 'colour'"),
    ] {
        let mut body = job.clone();
        body[field] = bad;
        let (status, answer) = send(&client, "POST", &base, Some(body)).await;
        assert_eq!(
            (status, answer),
            (422, json!({"detail": message})),
            "{field}"
        );
    }
    let (status, created) = send(&client, "POST", &base, Some(job.clone())).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    assert_eq!(created["schedule"], json!({"cron": "0 9 * * 1-5"}));
    assert_eq!(created["enabled"], true);
    // 09:00 in Los Angeles is 16:00 or 17:00 UTC.
    let next: Timestamp = created["nextRunAt"].as_str().unwrap().parse().unwrap();
    let local = next.to_zoned(jiff::tz::TimeZone::get("America/Los_Angeles").unwrap());
    assert_eq!((local.hour(), local.minute()), (9, 0));

    let (_, listed) = send(&client, "GET", &base, None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1);
    let (status, paused) = send(
        &client,
        "PATCH",
        &format!("{base}/{id}"),
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(paused["nextRunAt"], Value::Null);
    let (_, resumed) = send(
        &client,
        "PATCH",
        &format!("{base}/{id}"),
        Some(json!({"enabled": true, "schedule": {"every_seconds": 3600}})),
    )
    .await;
    assert_eq!(resumed["schedule"], json!({"every_seconds": 3600}));
    assert!(resumed["nextRunAt"].is_string());
    let (status, runs) = send(&client, "GET", &format!("{base}/{id}/runs"), None).await;
    assert_eq!((status, runs), (200, json!({"runs": []})));
    let (status, _) = send(&client, "DELETE", &format!("{base}/{id}"), None).await;
    assert_eq!(status, 204);
    for method in ["GET", "PATCH", "DELETE"] {
        let (status, _) = send(&client, method, &format!("{base}/{id}"), Some(json!({}))).await;
        assert_eq!(status, 404, "{method}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tick_fires_once_across_restarts_and_replicas() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let client = reqwest::Client::new();
    let (_, job) = send(
        &client,
        "POST",
        &format!("http://{addr}/api/v1/automation/jobs"),
        Some(json!({"name": "hourly", "schedule": {"every_seconds": 3600}, "timezone": "UTC", "prompt": "status report"})),
    )
    .await;
    let id = job["id"].as_str().unwrap().to_owned();
    let first: Timestamp = job["nextRunAt"].as_str().unwrap().parse().unwrap();
    let service = &server.service;

    // Not yet due.
    let early = first - SignedDuration::from_secs(1);
    assert_eq!(
        service.scheduler().run_due_jobs(early).await.unwrap(),
        Vec::<String>::new()
    );
    // Due: one run, on the job's thread, in automation mode.
    let fired = service.scheduler().run_due_jobs(first).await.unwrap();
    assert_eq!(fired, [format!("job-{id}-{}", first.as_millisecond())]);
    let status = wait_status(addr, &fired[0], "succeeded").await;
    assert_eq!(status["threadId"], job["threadId"]);
    // The same instant again: nothing.
    assert_eq!(
        service.scheduler().run_due_jobs(first).await.unwrap(),
        Vec::<String>::new()
    );

    // A restart (a new service on the same database) does not fire it again.
    let store = common::reopen(&server).await;
    let restarted = Service::new(store, Arc::new(BuiltinAgent::default()));
    restarted.start().await.unwrap();
    assert_eq!(
        restarted.scheduler().run_due_jobs(first).await.unwrap(),
        Vec::<String>::new()
    );

    // The next tick, with two schedulers racing on one database: once.
    let second = first + SignedDuration::from_secs(3600);
    let (one, other) = (service.scheduler(), restarted.scheduler());
    let (a, b) = tokio::join!(one.run_due_jobs(second), other.run_due_jobs(second));
    let mut both = a.unwrap();
    both.extend(b.unwrap());
    assert_eq!(both, [format!("job-{id}-{}", second.as_millisecond())]);
    wait_status(addr, &both[0], "succeeded").await;

    // Days of downtime: one catch-up run, then the schedule continues from now.
    let much_later = second + SignedDuration::from_hours(50);
    assert_eq!(
        service
            .scheduler()
            .run_due_jobs(much_later)
            .await
            .unwrap()
            .len(),
        1
    );
    let (_, job) = send(
        &client,
        "GET",
        &format!("http://{addr}/api/v1/automation/jobs/{id}"),
        None,
    )
    .await;
    let next: Timestamp = job["nextRunAt"].as_str().unwrap().parse().unwrap();
    assert_eq!(next, much_later + SignedDuration::from_secs(3600));

    let (_, runs) = send(
        &client,
        "GET",
        &format!("http://{addr}/api/v1/automation/jobs/{id}/runs"),
        None,
    )
    .await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 3);
    // The runs' messages are in the job's thread, one user turn per tick.
    let history = common::get_json(
        addr,
        &format!(
            "/api/v1/agent/history?threadId={}",
            job["threadId"].as_str().unwrap()
        ),
    )
    .await;
    let users = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, 3);
}

/// A job's thread is its owner's from the moment the job exists: another
/// user who learns its id cannot post to it (in any runtime mode), so the
/// job's private config never reaches them and its ticks keep firing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_else_can_take_a_jobs_thread() {
    use agwire_service::auth::sign_jwt;
    let secret = b"jobs-test-secret-0123";
    let server = start(
        &Config::default(),
        BuiltinAgent::default(),
        Auth::jwt(secret.to_vec()),
    )
    .await;
    let addr = server.addr;
    let far = Timestamp::now().as_second() + 3600;
    let alice = format!("Bearer {}", sign_jwt(secret, "alice", far));
    let bob = format!("Bearer {}", sign_jwt(secret, "bob", far));
    let client = reqwest::Client::new();
    let (status, job) = {
        let response = client
            .post(format!("http://{addr}/api/v1/automation/jobs"))
            .header("authorization", &alice)
            .json(&json!({
                "name": "secret brief", "schedule": {"every_seconds": 3600}, "timezone": "UTC",
                "prompt": "summarise", "config": {"context": [{"description": "alice's private note", "value": "the launch is on Friday"}]}
            }))
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap(),
        )
    };
    assert_eq!(status, 201, "{job}");
    let thread = job["threadId"].as_str().unwrap().to_owned();
    let id = job["id"].as_str().unwrap().to_owned();

    // Before the first tick, Bob posts to the job's thread: it is not his.
    for mode in ["automation", "chat"] {
        let mut take = common::body(&thread, &format!("bob-{mode}"), "what is my context?");
        take["forwardedProps"]["runtime_mode"] = json!(mode);
        let response = client
            .post(format!("http://{addr}/api/v1/agent/runs"))
            .header("authorization", &bob)
            .json(&take)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 404, "{mode}");
        assert_eq!(
            response.json::<Value>().await.unwrap(),
            json!({"detail": "thread not found"})
        );
    }
    let agui = client
        .post(format!("http://{addr}/api/v1/agui"))
        .header("authorization", &bob)
        .json(&json!({"threadId": thread, "runId": "bob-agui", "messages": [{"id": "m", "role": "user", "content": "hi"}], "state": {}, "tools": [], "context": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(agui.status().as_u16(), 404);

    // Alice's job still fires on its tick, on its thread, and lists only
    // its own runs.
    let due: Timestamp = job["nextRunAt"].as_str().unwrap().parse().unwrap();
    let fired = server.service.scheduler().run_due_jobs(due).await.unwrap();
    assert_eq!(fired, [format!("job-{id}-{}", due.as_millisecond())]);
    let runs: Value = client
        .get(format!("http://{addr}/api/v1/automation/jobs/{id}/runs"))
        .header("authorization", &alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["runId"], json!(fired[0]));
    let moved: Value = client
        .get(format!("http://{addr}/api/v1/automation/jobs/{id}"))
        .header("authorization", &alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(moved["nextRunAt"], job["nextRunAt"], "the job moved on");
}
