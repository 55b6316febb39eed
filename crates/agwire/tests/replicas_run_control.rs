//! Run control across two `agwire serve` replicas on one PostgreSQL
//! database: per-user quotas counted once for both (a burst posted to both
//! accepts exactly the quota; a user past the day's tokens on one replica is
//! refused on the other, with `Retry-After`), and signed webhooks delivered
//! once per run end (again only when the killed replica was answered and
//! died before recording it) to a real receiver that fails every message's
//! first two attempts and hangs on one message's third — when the replica
//! sending it is killed (SIGKILL), the other delivers it once the claim runs
//! out.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agwire_testkit::pg::PgDatabase;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::common;
use common::{body, data_dir, serve, wait_final};

const JWT_SECRET: &str = "replica-quota-secret-0123456789";
const WEBHOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// An HS256 token for `user` (what the replicas verify with `JWT_SECRET`).
fn token(user: &str) -> String {
    agwire_service::auth::sign_jwt(JWT_SECRET.as_bytes(), user, 4_000_000_000)
}

async fn post_as(
    client: &reqwest::Client,
    base: &str,
    user: &str,
    body: &Value,
) -> reqwest::Response {
    client
        .post(format!("{base}/api/v1/agent/runs"))
        .bearer_auth(token(user))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// `GET path` as `user`, its JSON.
async fn get_as(client: &reqwest::Client, base: &str, user: &str, path: &str) -> Value {
    client
        .get(format!("{base}{path}"))
        .bearer_auth(token(user))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn usage(client: &reqwest::Client, base: &str, user: &str) -> Value {
    get_as(client, base, user, "/api/v1/me/usage").await
}

async fn wait_final_as(client: &reqwest::Client, base: &str, user: &str, run: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = get_as(client, base, user, &format!("/api/v1/agent/runs/{run}")).await;
        if !["queued", "running"].contains(&status["status"].as_str().unwrap_or("queued")) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "{run} not final within 60 s: {status}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_hold_one_quota() {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let env = [
        ("AGWIRE_DATABASE_URL", database.url.as_str()),
        ("AGWIRE_JWT_SECRET", JWT_SECRET),
        ("AGWIRE_QUOTA_RUNS_PER_MINUTE", "4"),
        ("AGWIRE_QUOTA_TOKENS_PER_DAY", "100"),
    ];
    let replicas: Vec<_> = (0..2)
        .map(|_| serve(&data_dir("quotas"), &[], &env))
        .collect();
    let bases = [replicas[0].base.clone(), replicas[1].base.clone()];
    let client = reqwest::Client::new();

    // A burst of 12 short runs, alternating replicas, all at once: exactly 4
    // accepted (each uses about 24 tokens: 96 in all, under the day's 100).
    let posts = (0..12).map(|i| {
        let (client, base) = (client.clone(), bases[i % 2].clone());
        async move {
            let thread = uuid::Uuid::new_v4().to_string();
            let answer = post_as(
                &client,
                &base,
                "rita",
                &body(&thread, &format!("r{i}"), "hi"),
            )
            .await;
            let status = answer.status().as_u16();
            let retry = answer
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
            let detail = answer
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v["detail"].as_str().map(str::to_owned));
            (status, retry, detail)
        }
    });
    let answers = futures_util::future::join_all(posts).await;
    let accepted = answers.iter().filter(|(s, _, _)| *s == 202).count();
    assert_eq!(accepted, 4, "{answers:?}");
    for (status, retry, detail) in answers.iter().filter(|(s, _, _)| *s != 202) {
        assert_eq!(*status, 429, "{answers:?}");
        assert!(retry.is_some_and(|r| (1..=60).contains(&r)), "{answers:?}");
        assert_eq!(detail.as_deref(), Some("quota exceeded: 4 runs per minute"));
    }
    for base in &bases {
        assert_eq!(
            usage(&client, base, "rita").await["runs"]["lastMinute"],
            4,
            "{base}"
        );
    }

    // One long run (its answer repeats 150 words: over the day's 100 tokens)
    // on the first replica; then the second refuses the next until midnight.
    let long = vec!["word"; 150].join(" ");
    let thread = uuid::Uuid::new_v4().to_string();
    let first = post_as(&client, &bases[0], "tom", &body(&thread, "t1", &long)).await;
    assert_eq!(first.status(), 202);
    assert_eq!(
        wait_final_as(&client, &bases[0], "tom", "t1").await["status"],
        "succeeded"
    );
    let used = usage(&client, &bases[1], "tom").await;
    assert!(used["tokens"]["today"].as_u64().unwrap() >= 100, "{used}");
    let refused = post_as(&client, &bases[1], "tom", &body(&thread, "t2", "more")).await;
    assert_eq!(refused.status(), 429);
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&retry), "{retry}");
    assert_eq!(
        refused.json::<Value>().await.unwrap()["detail"],
        "quota exceeded: 100 tokens per day"
    );
}

/// One attempt as the receiver saw it.
#[derive(Debug, Clone)]
struct Attempt {
    /// The replica whose URL it came to (`a` or `b`).
    replica: String,
    headers: HeaderMap,
    body: String,
    /// 0: never answered (the hung one).
    answered: u16,
}

#[derive(Default)]
struct Receiver {
    attempts: Mutex<Vec<Attempt>>,
    /// The replica that sent the attempt the receiver hangs on.
    hung: Mutex<Option<String>>,
}

/// Fails each message's first two attempts with 500; hangs on the first
/// third attempt of any message (and tells who sent it); answers 204 to the
/// rest.
async fn receive(
    receiver: Arc<Receiver>,
    replica: String,
    headers: HeaderMap,
    body: String,
) -> StatusCode {
    let id = headers["webhook-id"].to_str().unwrap().to_owned();
    let answered = {
        let mut attempts = receiver.attempts.lock().unwrap();
        let before = attempts
            .iter()
            .filter(|a| a.headers["webhook-id"] == id.as_str())
            .count();
        let mut hung = receiver.hung.lock().unwrap();
        let answered = match before {
            0 | 1 => Some(StatusCode::INTERNAL_SERVER_ERROR),
            2 if hung.is_none() => {
                *hung = Some(replica.clone());
                None
            }
            _ => Some(StatusCode::NO_CONTENT),
        };
        attempts.push(Attempt {
            replica,
            headers,
            body,
            answered: answered.map_or(0, |status| status.as_u16()),
        });
        answered
    };
    match answered {
        Some(status) => status,
        // Until the connection goes with the replica that opened it.
        None => std::future::pending().await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhooks_are_delivered_once_per_run_end_despite_failures_and_a_replica_killed_mid_delivery()
 {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let receiver = Arc::new(Receiver::default());
    let app = axum::Router::new().route(
        "/{replica}",
        axum::routing::post({
            let receiver = receiver.clone();
            move |Path(replica): Path<String>, headers: HeaderMap, body: String| {
                receive(receiver.clone(), replica, headers, body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // Each replica posts to a path of its own, so the receiver knows which
    // one sends an attempt. Retries a second apart; an attempt times out in
    // 2 s, so a claim lasts 9 s.
    let mut replicas: BTreeMap<String, common::Serve> = BTreeMap::new();
    for name in ["a", "b"] {
        let dir = data_dir("webhooks");
        let config = dir.join("agwire.toml");
        std::fs::write(
            &config,
            format!(
                "[webhooks]\nurl = \"http://{hook}/{name}\"\nsecret = \"{WEBHOOK_SECRET}\"\n\
                 allow_private = true\nretry_seconds = [1, 1, 1, 1, 1, 1]\ntimeout_seconds = 2\n"
            ),
        )
        .unwrap();
        let env = [("AGWIRE_DATABASE_URL", database.url.as_str())];
        let args = ["--config", config.to_str().unwrap()];
        replicas.insert(name.to_owned(), serve(&dir, &args, &env));
    }
    let bases: Vec<String> = replicas.values().map(|r| r.base.clone()).collect();
    let client = reqwest::Client::new();
    let runs: Vec<String> = (0..6).map(|i| format!("w{i}")).collect();
    for (i, run) in runs.iter().enumerate() {
        let thread = uuid::Uuid::new_v4().to_string();
        let answer = client
            .post(format!("{}/api/v1/agent/runs", bases[i % 2]))
            .json(&body(&thread, run, "hi"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 202);
    }
    let mut tasks = BTreeMap::new();
    for run in &runs {
        let status = wait_final(&client, &bases[0], run).await;
        assert_eq!(status["status"], "succeeded");
        tasks.insert(
            format!("msg_{}", status["taskId"].as_str().unwrap()),
            run.clone(),
        );
    }

    // The receiver hangs on a third attempt: kill the replica sending it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let killed = loop {
        if let Some(name) = receiver.hung.lock().unwrap().clone() {
            break name;
        }
        assert!(Instant::now() < deadline, "no third attempt within 60 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut victim = replicas.remove(&killed).unwrap();
    victim.child.kill().unwrap();
    victim.child.wait().unwrap();
    eprintln!("killed replica {killed} mid-delivery");
    let survivor = replicas.values().next().unwrap().base.clone();

    // Every run end's message is acknowledged, the hung one by the survivor
    // once the dead replica's claim ran out.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let pending = client
            .get(format!("{survivor}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .lines()
            .find_map(|l| {
                l.strip_prefix("agwire_webhooks_pending ")
                    .map(str::to_owned)
            });
        let acknowledged: BTreeSet<String> = receiver
            .attempts
            .lock()
            .unwrap()
            .iter()
            .filter(|a| (200..300).contains(&a.answered))
            .map(|a| a.headers["webhook-id"].to_str().unwrap().to_owned())
            .collect();
        if pending.as_deref() == Some("0") && acknowledged.len() == runs.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not all delivered within 90 s: pending {pending:?}, acknowledged {acknowledged:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let attempts = receiver.attempts.lock().unwrap().clone();
    let judge = standardwebhooks::Webhook::new(WEBHOOK_SECRET).unwrap();
    for (id, run) in &tasks {
        let mine: Vec<&Attempt> = attempts
            .iter()
            .filter(|a| a.headers["webhook-id"] == id.as_str())
            .collect();
        let delivered: Vec<&&Attempt> = mine.iter().filter(|a| a.answered == 204).collect();
        // Exactly once, but for the one case at-least-once delivery allows
        // (Standard Webhooks; receivers dedupe by webhook-id): the killed
        // replica got its 204 and died before recording it, so the
        // survivor delivered it again once the claim ran out. No live
        // replica ever delivers a message twice.
        let (lost, recorded): (Vec<&&Attempt>, Vec<&&Attempt>) = delivered
            .iter()
            .partition(|a| a.replica == killed && delivered.len() > 1);
        assert_eq!(recorded.len(), 1, "{run}: exactly once: {mine:#?}");
        if !lost.is_empty() {
            assert_ne!(recorded[0].replica, killed, "{run}: {mine:#?}");
        }
        let delivered = recorded;
        assert!(mine.len() >= 3, "{run}: two failures first");
        for attempt in &mine {
            assert_eq!(
                attempt.body, mine[0].body,
                "{run}: the same body every time"
            );
            judge
                .verify(attempt.body.as_bytes(), &attempt.headers)
                .unwrap_or_else(|e| panic!("{run}: the signature does not verify: {e:?}"));
        }
        let payload: Value = serde_json::from_str(&delivered[0].body).unwrap();
        assert_eq!(payload["type"], "run.succeeded");
        assert_eq!(payload["data"]["runId"], run.as_str());
        if mine.iter().any(|a| a.answered == 0) {
            assert_ne!(
                delivered[0].replica, killed,
                "{run}: the survivor delivered it"
            );
            assert!(mine.len() >= 4, "{run}: after the hung third attempt");
        }
    }
    // What the receiver saw twice or more was only ever a retry: no
    // message it acknowledged came again, but for the killed replica's
    // deliveries it never recorded (at most the ones in flight when it
    // died).
    let acknowledged = attempts.iter().filter(|a| a.answered == 204).count();
    let by_victim = attempts
        .iter()
        .filter(|a| a.answered == 204 && a.replica == killed)
        .count();
    assert!(
        acknowledged >= runs.len() && acknowledged - runs.len() <= by_victim,
        "{acknowledged} acknowledgements for {} runs, {by_victim} by the killed replica",
        runs.len()
    );
}
