//! Three `agwire serve` processes on one PostgreSQL database, as behind a
//! load balancer: runs posted round-robin, each streamed from another
//! replica than the one that accepted it, followers that drop their
//! connection at random resume with `Last-Event-ID` on yet another one, a
//! cancel posted to a replica that does not execute the run, and one
//! replica killed with SIGKILL in the middle. Afterwards every accepted run
//! is terminal with a valid log, every client saw each event exactly once,
//! and every user message is in its thread exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agwire_client::core::{DecodeMode, Event};
use rand::Rng;
use serde_json::Value;

mod support;
use support::{Serve, body, checked_log, data_dir, get, serve};

#[path = "../../agwire-service/tests/support/pg_database.rs"]
mod pg_database;
use pg_database::PgDatabase;

const RUNS: usize = 300;
const LEASE_SECONDS: u64 = 3;

/// What a follower saw of one run, across all its connections.
#[derive(Debug, Default)]
struct Seen {
    ids: Vec<u64>,
    connections: usize,
}

/// Follows `run` from `bases[start]`, dropping the connection at random and
/// resuming with `Last-Event-ID` on the next replica (skipping any that is
/// gone), until the run's terminal event.
async fn follow(
    client: reqwest::Client,
    bases: Arc<Vec<String>>,
    start: usize,
    run: String,
) -> Seen {
    let mut seen = Seen::default();
    let mut replica = start;
    let deadline = Instant::now() + Duration::from_secs(120);
    'connections: loop {
        assert!(Instant::now() < deadline, "{run}: never saw its end");
        let base = &bases[replica % bases.len()];
        replica += 1;
        let mut request = client.get(format!("{base}/api/v1/agent/runs/{run}/events"));
        if let Some(last) = seen.ids.last() {
            request = request.header("last-event-id", last.to_string());
        }
        let Ok(mut response) = request.send().await else {
            continue; // that replica is gone: the next one
        };
        assert_eq!(response.status().as_u16(), 200, "{run} on {base}");
        seen.connections += 1;
        // Leave after a random number of frames (often never).
        let leave_after = if rand::rng().random_bool(0.3) {
            rand::rng().random_range(1..6)
        } else {
            usize::MAX
        };
        let mut decoder = agwire_codec::sse::SseDecoder::new();
        let mut taken = 0;
        loop {
            // Cut off (a replica killed) or ended without the terminal
            // event: resume elsewhere.
            let Ok(Some(chunk)) = response.chunk().await else {
                continue 'connections;
            };
            let mut frames = Vec::new();
            decoder.push(&chunk, &mut frames).unwrap();
            for frame in frames {
                let id: u64 = frame.id.as_deref().unwrap().parse().unwrap();
                seen.ids.push(id);
                let event = agwire_codec::sse::decode_frame(&frame, DecodeMode::Lenient)
                    .unwrap()
                    .value;
                if matches!(event, Event::RunFinished(_) | Event::RunError(_)) {
                    return seen;
                }
                taken += 1;
                if taken >= leave_after {
                    continue 'connections;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_on_one_database_behave_as_one_service_and_survive_a_kill() {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let config = data_dir("replicas").join("agwire.toml");
    std::fs::write(
        &config,
        format!("[store]\nlease_seconds = {LEASE_SECONDS}\n[runs]\nbusy_thread = \"enqueue\"\n"),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_owned();
    let mut replicas: Vec<Serve> = (0..3)
        .map(|_| {
            serve(
                &data_dir("replica"),
                &["--config", &config, "--builtin-token-delay-ms", "15"],
                &[("AGWIRE_DATABASE_URL", database.url.as_str())],
            )
        })
        .collect();
    let bases: Arc<Vec<String>> = Arc::new(replicas.iter().map(|r| r.base.clone()).collect());
    let client = reqwest::Client::new();
    let mut names = Vec::new();
    for base in bases.iter() {
        let health = get(&client, base, "/healthz").await;
        names.push(health["replica"].as_str().unwrap().to_owned());
    }
    let pool = sqlx::PgPool::connect(&database.url).await.unwrap();

    // A job whose tick falls due just after the kill: fired exactly once by
    // the replicas racing for it.
    let job: Value = client
        .post(format!("{}/api/v1/automation/jobs", bases[0]))
        .json(&serde_json::json!({
            "name": "tick", "schedule": {"every_seconds": 3600},
            "timezone": "UTC", "prompt": "the hourly report"
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let job_id = job["id"].as_str().unwrap().to_owned();
    sqlx::query(
        "UPDATE automation_jobs SET next_run_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + 2000 WHERE id = $1",
    )
    .bind(&job_id)
    .execute(&pool)
    .await
    .unwrap();

    // An image uploaded to one replica is served, by its signed URL, by
    // another.
    let png = b"\x89PNG\r\n\x1a\n a tiny picture".to_vec();
    let uploaded: Value = client
        .post(format!("{}/api/v1/agent/attachments", bases[0]))
        .header("content-type", "image/png")
        .body(png.clone())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let signed = uploaded["url"].as_str().unwrap();
    let path = &signed[signed.find("/api/").unwrap()..];
    let fetched = client
        .get(format!("{}{path}", bases[1]))
        .send()
        .await
        .unwrap();
    assert_eq!(fetched.status().as_u16(), 200, "{uploaded}");
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), png.as_slice());

    // Posted round-robin; each followed from the next replica.
    let mut accepted: BTreeMap<String, String> = BTreeMap::new(); // run -> thread
    let mut followers = Vec::new();
    let mut killed = false;
    for i in 0..RUNS {
        if i == RUNS / 3 {
            // SIGKILL the third replica while a third of the runs are in
            // flight: its running runs are abandoned, its queued ones are
            // the survivors' to execute.
            let victim = &mut replicas[2];
            victim.child.kill().unwrap();
            victim.child.wait().unwrap();
            killed = true;
        }
        let live = if killed { 2 } else { 3 };
        let base = &bases[i % live];
        let thread = uuid::Uuid::new_v4().to_string();
        let run = format!("run-{i}");
        let posted = client
            .post(format!("{base}/api/v1/agent/runs"))
            .json(&body(
                &thread,
                &run,
                &format!("message number {i} for the replicas"),
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(posted.status().as_u16(), 202, "{run}");
        accepted.insert(run.clone(), thread);
        followers.push((
            run.clone(),
            tokio::spawn(follow(client.clone(), bases.clone(), i + 1, run)),
        ));
    }

    // A cancel posted to every replica but the one executing the run.
    let thread = uuid::Uuid::new_v4().to_string();
    let slow_text = "cancel me ".repeat(40);
    let posted = client
        .post(format!("{}/api/v1/agent/runs", bases[0]))
        .json(&body(&thread, "to-cancel", &slow_text))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status().as_u16(), 202);
    // Wait for it to start, and ask a replica that does not execute it.
    let owner = loop {
        let owner: Option<String> = sqlx::query_scalar(
            "SELECT owner FROM runs WHERE run_id = 'to-cancel' AND status = 'running'",
        )
        .fetch_optional(&pool)
        .await
        .unwrap()
        .flatten();
        if let Some(owner) = owner {
            break owner;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let executing = names.iter().position(|n| *n == owner).unwrap();
    assert_ne!(executing, 2, "the killed replica executes nothing");
    let elsewhere = 1 - executing;
    let cancelled = client
        .post(format!(
            "{}/api/v1/agent/runs/to-cancel/cancel",
            bases[elsewhere]
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status().as_u16(), 202);

    let mut saw_every_event_once = 0;
    let mut resumed = 0;
    let mut logs: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for (run, follower) in followers {
        let seen = follower.await.unwrap();
        let thread = &accepted[&run];
        let log = checked_log(&client, &bases[0], thread, &run).await;
        // Each event exactly once, in order, across every connection.
        assert_eq!(
            seen.ids,
            (1..=log.len() as u64).collect::<Vec<_>>(),
            "{run}: what the client saw"
        );
        saw_every_event_once += 1;
        resumed += usize::from(seen.connections > 1);
        logs.insert(run, log);
    }
    // Every user message in its thread exactly once (any replica answers).
    for (i, (run, thread)) in accepted.iter().enumerate() {
        let history = get(
            &client,
            &bases[i % 2],
            &format!("/api/v1/agent/history?threadId={thread}"),
        )
        .await;
        let users = history["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .count();
        assert_eq!(users, 1, "{run}: {history}");
    }
    // The cancel reached the replica executing the run.
    let status = wait_terminal(&client, &bases[1], "to-cancel").await;
    assert_eq!(status["status"], "cancelled", "{status}");
    // The job's tick fired once.
    let job_runs = get(
        &client,
        &bases[1],
        &format!("/api/v1/automation/jobs/{job_id}/runs"),
    )
    .await;
    assert_eq!(job_runs["runs"].as_array().unwrap().len(), 1, "{job_runs}");
    wait_terminal(
        &client,
        &bases[0],
        job_runs["runs"][0]["runId"].as_str().unwrap(),
    )
    .await;
    // Nothing is left active in the database.
    let active: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(active, 0);
    let interrupted = logs
        .values()
        .filter(|log| {
            matches!(log.last(), Some(Event::RunError(e)) if e.code.as_deref() == Some("server_restart"))
        })
        .count();
    pool.close().await;
    eprintln!(
        "3 replicas, one killed: {} runs accepted, {saw_every_event_once} followed exactly once \
         ({resumed} resumed on another replica), {interrupted} interrupted by the kill",
        accepted.len()
    );
}

async fn wait_terminal(client: &reqwest::Client, base: &str, run: &str) -> Value {
    for _ in 0..600 {
        let status = get(client, base, &format!("/api/v1/agent/runs/{run}")).await;
        if !["queued", "running"].contains(&status["status"].as_str().unwrap()) {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{run} never ended");
}
