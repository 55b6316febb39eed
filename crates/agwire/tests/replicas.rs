//! Three `agwire serve` processes on one PostgreSQL database, as behind a
//! load balancer: runs posted round-robin, each streamed from another
//! replica than the one that accepted it, followers that drop their
//! connection at random resume with `Last-Event-ID` on yet another one, a
//! cancel posted to a replica that does not execute the run, and one
//! replica killed with SIGKILL in the middle — while it executes runs and
//! streams to followers. Afterwards every accepted run is terminal with a
//! valid log, exactly the runs the killed replica was executing ended
//! `server_restart`, the streams it served resumed on the others, every
//! client saw each event exactly once, and every user message is in its
//! thread exactly once. With `AGWIRE_TEST_ATTACHMENTS=bucket` (the test
//! command's bucket pass) the replicas keep their attachments in one
//! SeaweedFS bucket.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agwire_client::core::{DecodeMode, Event};
use agwire_testkit::pg::PgDatabase;
use agwire_testkit::s3::{BUCKET, SeaweedFs};
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::common;
use common::{Serve, body, checked_log, data_dir, get, seeded_rng, serve, until};

const RUNS: usize = 300;
const LEASE_SECONDS: u64 = 3;
/// The replica killed (the last of three).
const VICTIM: usize = 2;

/// What a follower saw of one run, across all its connections.
#[derive(Debug, Default)]
struct Seen {
    ids: Vec<u64>,
    connections: usize,
    /// Connections that ended (cut off, or closed) before the run's
    /// terminal event without the follower leaving, by the replica that
    /// served them: each was resumed on another replica.
    cut_off: BTreeMap<usize, usize>,
}

/// Followers connected to the victim now, still waiting for their run's
/// end and never leaving on their own: each is cut off by the kill.
static WAITING_ON_VICTIM: AtomicUsize = AtomicUsize::new(0);

/// Counts a follower in [`WAITING_ON_VICTIM`] while it lives.
struct OnVictim;
impl OnVictim {
    fn new() -> Self {
        WAITING_ON_VICTIM.fetch_add(1, Ordering::SeqCst);
        Self
    }
}
impl Drop for OnVictim {
    fn drop(&mut self) {
        WAITING_ON_VICTIM.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Follows `run` from `bases[start]`, dropping the connection at random
/// (`seed`) and resuming with `Last-Event-ID` on the next replica (skipping
/// any that is gone), until the run's terminal event.
async fn follow(
    client: reqwest::Client,
    bases: Arc<Vec<String>>,
    start: usize,
    run: String,
    seed: u64,
) -> Seen {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut seen = Seen::default();
    let mut replica = start;
    let deadline = Instant::now() + Duration::from_secs(120);
    'connections: loop {
        assert!(Instant::now() < deadline, "{run}: never saw its end");
        let on = replica % bases.len();
        let base = &bases[on];
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
        let leave_after = if rng.random_bool(0.3) {
            rng.random_range(1..6)
        } else {
            usize::MAX
        };
        let _waiting = (on == VICTIM && leave_after == usize::MAX).then(OnVictim::new);
        let mut decoder = agwire_codec::sse::SseDecoder::new();
        let mut taken = 0;
        loop {
            // Cut off (a replica killed) or ended without the terminal
            // event: resume elsewhere. (Bounded: a replica that stops
            // sending without closing fails the test, not the run's wall.)
            let chunk = tokio::time::timeout_at(deadline.into(), response.chunk())
                .await
                .unwrap_or_else(|_| panic!("{run}: no frame from {base} before the deadline"));
            let Ok(Some(chunk)) = chunk else {
                *seen.cut_off.entry(on).or_default() += 1;
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

/// Sends `signal` to `child`.
fn signal(child: &std::process::Child, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {signal}");
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
    let mut env = vec![("AGWIRE_DATABASE_URL", database.url.clone())];
    let weed = if std::env::var("AGWIRE_TEST_ATTACHMENTS").as_deref() == Ok("bucket") {
        let weed = SeaweedFs::start().expect("AGWIRE_TEST_ATTACHMENTS=bucket needs SeaweedFS");
        env.extend(weed.env());
        let prefix = uuid::Uuid::new_v4().simple();
        env.push(("AGWIRE_ATTACHMENTS_URL", format!("s3://{BUCKET}/{prefix}")));
        eprintln!(
            "attachments under test: {}/{BUCKET}/{prefix}",
            weed.endpoint
        );
        Some(weed)
    } else {
        None
    };
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut replicas: Vec<Serve> = (0..3)
        .map(|_| {
            serve(
                &data_dir("replica"),
                &["--config", &config, "--builtin-token-delay-ms", "15"],
                &env,
            )
        })
        .collect();
    let bases: Arc<Vec<String>> = Arc::new(replicas.iter().map(|r| r.base.clone()).collect());
    let mut rng =
        seeded_rng("three_replicas_on_one_database_behave_as_one_service_and_survive_a_kill");
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
    // another — or, in a bucket, by the bucket, and a run with it is
    // accepted by another.
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
    let fetched = match &weed {
        Some(weed) => {
            assert!(signed.starts_with(&weed.endpoint), "{uploaded}");
            client.get(signed).send().await.unwrap()
        }
        None => {
            let path = &signed[signed.find("/api/").unwrap()..];
            client
                .get(format!("{}{path}", bases[1]))
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(fetched.status().as_u16(), 200, "{uploaded}");
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), png.as_slice());
    let mut with_image = body(&uuid::Uuid::new_v4().to_string(), "with-image", "x");
    with_image["messages"][0]["content"] = serde_json::json!([
        {"type": "text", "text": "what is this?"},
        {"type": "binary", "mimeType": "image/png", "url": signed}
    ]);
    let accepted = client
        .post(format!("{}/api/v1/agent/runs", bases[1]))
        .json(&with_image)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status().as_u16(), 202);
    let ran = wait_terminal(&client, &bases[0], "with-image").await;
    assert_eq!(ran["status"], "succeeded", "{ran}");
    // Its log is valid on the third replica, and its thread, read there,
    // keeps the image, whose freshly signed URL serves the uploaded bytes.
    // (The replicas run the built-in agent, which reads no image: that an
    // agent on another replica is given these bytes, and which replica
    // executed, is bucket_replicas', where each replica has a model.)
    let thread = with_image["threadId"].as_str().unwrap();
    let said: String = checked_log(&client, &bases[2], thread, "with-image")
        .await
        .iter()
        .filter_map(|e| match e {
            Event::TextMessageContent(c) => Some(c.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(said, "You said: what is this?");
    let history = get(
        &client,
        &bases[2],
        &format!("/api/v1/agent/history?threadId={thread}"),
    )
    .await;
    let attachments = &history["messages"][0]["attachments"];
    assert_eq!(attachments.as_array().map(Vec::len), Some(1), "{history}");
    let fresh = attachments[0]["url"].as_str().unwrap();
    let fresh = if fresh.starts_with("http") {
        fresh.to_owned()
    } else {
        format!("{}{fresh}", bases[0])
    };
    let again = client.get(&fresh).send().await.unwrap();
    assert_eq!(again.status().as_u16(), 200, "{fresh}");
    assert_eq!(again.bytes().await.unwrap().as_ref(), png.as_slice());

    // Posted round-robin; each followed from the next replica.
    let mut accepted: BTreeMap<String, String> = BTreeMap::new(); // run -> thread
    let mut followers = Vec::new();
    let mut killed = false;
    let mut owned_at_kill = BTreeSet::new();
    for i in 0..RUNS {
        if i == RUNS / 3 {
            // SIGKILL the third replica once a third of the runs are in
            // flight, and only while it executes runs and streams to a
            // follower that waits for its run's end: its running runs are
            // abandoned, its queued ones are the survivors' to execute,
            // its followers resume elsewhere.
            let victim = &mut replicas[VICTIM];
            let executing = "SELECT run_id FROM runs WHERE owner = $1 AND status = 'running' \
                             AND run_id LIKE 'run-%'";
            let deadline = Instant::now() + Duration::from_secs(60);
            while owned_at_kill.is_empty() {
                assert!(
                    Instant::now() < deadline,
                    "the victim never executed and streamed at once"
                );
                if WAITING_ON_VICTIM.load(Ordering::SeqCst) == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                // Stopped first, so that what it executes can be read
                // before the kill and cannot change after; let go again if
                // it executes nothing right now.
                signal(&victim.child, "-STOP");
                owned_at_kill = sqlx::query_scalar::<_, String>(executing)
                    .bind(&names[VICTIM])
                    .fetch_all(&pool)
                    .await
                    .unwrap()
                    .into_iter()
                    .collect();
                if owned_at_kill.is_empty() {
                    signal(&victim.child, "-CONT");
                }
            }
            victim.child.kill().unwrap(); // SIGKILL
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
            tokio::spawn(follow(
                client.clone(),
                bases.clone(),
                i + 1,
                run,
                rng.random(),
            )),
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
    let owner = std::sync::Mutex::new(String::new());
    until(
        "the run to cancel starts",
        Duration::from_secs(60),
        || async {
            let found: Option<String> = sqlx::query_scalar(
                "SELECT owner FROM runs WHERE run_id = 'to-cancel' AND status = 'running'",
            )
            .fetch_optional(&pool)
            .await
            .unwrap()
            .flatten();
            let started = found.is_some();
            *owner.lock().unwrap() = found.unwrap_or_default();
            started
        },
    )
    .await;
    let owner = owner.into_inner().unwrap();
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
    let mut cut_off: BTreeMap<usize, usize> = BTreeMap::new();
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
        for (replica, n) in seen.cut_off {
            *cut_off.entry(replica).or_default() += n;
        }
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
    // The runs interrupted (ended by a survivor with `server_restart`) are
    // runs the victim was executing at the kill, and there are some; any
    // other run it held then had its end already on the way to the database
    // (sent before the stop, committed after it) and finished whole.
    let interrupted: BTreeSet<String> = logs
        .iter()
        .filter(|(_, log)| {
            matches!(log.last(), Some(Event::RunError(e)) if e.code.as_deref() == Some("server_restart"))
        })
        .map(|(run, _)| run.clone())
        .collect();
    assert!(!interrupted.is_empty(), "the kill interrupted no run");
    assert!(
        interrupted.is_subset(&owned_at_kill),
        "interrupted {interrupted:?}, but the victim held {owned_at_kill:?}"
    );
    for run in owned_at_kill.difference(&interrupted) {
        assert!(
            matches!(logs[run].last(), Some(Event::RunFinished(_))),
            "{run}: held by the victim, neither interrupted nor finished"
        );
    }
    // Streams the kill cut off resumed on another replica (and, above, saw
    // every event exactly once); a surviving replica cut none short (the
    // client's resuming would hide it).
    assert!(
        cut_off.get(&VICTIM).is_some_and(|n| *n > 0),
        "no stream was cut off by the kill: {cut_off:?}"
    );
    for (replica, n) in &cut_off {
        assert!(
            *replica == VICTIM || *n == 0,
            "surviving replica {replica} cut {n} streams short before their run's end: {cut_off:?}"
        );
    }
    pool.close().await;
    eprintln!(
        "3 replicas, one killed: {} runs accepted, {saw_every_event_once} followed exactly once \
         ({resumed} resumed on another replica, connections cut off by replica {cut_off:?}), {} interrupted \
         by the kill, of the {} it held",
        accepted.len(),
        interrupted.len(),
        owned_at_kill.len()
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
