//! Signed webhooks on run end over real HTTP: a receiver (an HTTP server on
//! loopback, so `allow_private`) that fails every message's first two
//! attempts acknowledges each run end's message exactly once, on the third,
//! each attempt signed as the Standard Webhooks project's own library
//! verifies, with the same id and body every time; `/metrics` counts it.
//! Also: a receiver that hangs holds no run up, and a URL that resolves to
//! a loopback address without `allow_private` is refused on delivery.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agwire_service::Config;
use agwire_service::auth::Auth;
use agwire_service::webhooks::{Webhooks, WebhooksConfig};
use axum::http::{HeaderMap, StatusCode};
use common::{Database, body, post, start_on, wait_status};
use serde_json::Value;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One attempt as the receiver saw it.
#[derive(Debug, Clone)]
struct Attempt {
    headers: HeaderMap,
    body: String,
    answered: u16,
}

/// A webhook receiver: fails each message's first `fail_first` attempts
/// with 500, then answers 204 (or, with `hang`, never answers).
async fn receiver(fail_first: usize, hang: bool) -> (SocketAddr, Arc<Mutex<Vec<Attempt>>>) {
    let seen: Arc<Mutex<Vec<Attempt>>> = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let log = log.clone();
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                let mut log = log.lock().unwrap();
                let id = headers["webhook-id"].to_str().unwrap().to_owned();
                let before = log
                    .iter()
                    .filter(|a| a.headers["webhook-id"] == id.as_str())
                    .count();
                let answered = if before < fail_first {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::NO_CONTENT
                };
                log.push(Attempt {
                    headers,
                    body,
                    answered: answered.as_u16(),
                });
                answered
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

fn webhooks(url: String, allow_private: bool) -> Option<Webhooks> {
    Webhooks::from_config(&WebhooksConfig {
        url: Some(url),
        secret: Some(SECRET.into()),
        allow_private,
        retry_seconds: vec![1, 1, 1],
        // A hanging receiver's attempts fail this soon.
        timeout_seconds: 2,
    })
    .unwrap()
}

async fn metrics(addr: SocketAddr) -> String {
    reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn until(what: &str, bound: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !done().await {
        assert!(Instant::now() < deadline, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_run_end_is_acknowledged_once_signed_despite_two_failures() {
    let (receiver_addr, seen) = receiver(2, false).await;
    let url = format!("http://{receiver_addr}/hook");
    let server = start_on(
        Database::fresh("webhooks").await,
        &Config::default(),
        Auth::none(),
        |service| service.with_webhooks(webhooks(url, true)),
    )
    .await;
    let addr = server.addr;
    let thread = uuid::Uuid::new_v4().to_string();
    for run in ["w1", "w2"] {
        assert_eq!(
            post(addr, &body(&thread, run, "hello"), None)
                .await
                .status(),
            202
        );
        wait_status(addr, run, "succeeded").await;
    }

    // Each message: two failures, then acknowledged.
    let acknowledged = |seen: &Mutex<Vec<Attempt>>| {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|a| a.answered == 204)
            .count()
    };
    until("both acknowledged", Duration::from_secs(60), async || {
        acknowledged(&seen) == 2
    })
    .await;
    until(
        "recorded as delivered",
        Duration::from_secs(30),
        async || {
            metrics(addr)
                .await
                .contains("agwire_webhook_deliveries_total{outcome=\"delivered\"} 2\n")
        },
    )
    .await;
    let text = metrics(addr).await;
    assert!(
        text.contains("agwire_webhook_deliveries_total{outcome=\"failed\"} 4\n"),
        "{text}"
    );
    assert!(text.contains("agwire_webhooks_pending 0\n"), "{text}");

    let attempts = seen.lock().unwrap().clone();
    let mut by_id: BTreeMap<String, Vec<&Attempt>> = BTreeMap::new();
    for attempt in &attempts {
        by_id
            .entry(attempt.headers["webhook-id"].to_str().unwrap().to_owned())
            .or_default()
            .push(attempt);
    }
    assert_eq!(by_id.len(), 2, "{attempts:?}");
    let judge = standardwebhooks::Webhook::new(SECRET).unwrap();
    let mut runs = Vec::new();
    for (id, tries) in &by_id {
        let answers: Vec<u16> = tries.iter().map(|a| a.answered).collect();
        assert_eq!(answers, [500, 500, 204], "{id}: acknowledged exactly once");
        for attempt in tries {
            // Every attempt: the same body, signed for its own timestamp.
            assert_eq!(attempt.body, tries[0].body, "{id}");
            judge
                .verify(attempt.body.as_bytes(), &attempt.headers)
                .unwrap_or_else(|e| panic!("{id}: the signature does not verify: {e:?}"));
        }
        let payload: Value = serde_json::from_str(&tries[0].body).unwrap();
        assert_eq!(payload["type"], "run.succeeded", "{payload}");
        assert_eq!(
            *id,
            format!("msg_{}", payload["data"]["taskId"].as_str().unwrap())
        );
        assert_eq!(payload["data"]["threadId"], thread.as_str());
        runs.push(payload["data"]["runId"].as_str().unwrap().to_owned());
    }
    runs.sort();
    assert_eq!(runs, ["w1", "w2"]);
    // A tampered body does not verify (the judge judges).
    let first = &attempts[0];
    assert!(judge.verify(b"{}", &first.headers).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_hangs_holds_no_run_up_and_private_addresses_are_refused() {
    // Hanging: runs still end at once; the delivery times out and is retried.
    let (hanging, _) = receiver(0, true).await;
    let server = start_on(
        Database::fresh("webhooks-hang").await,
        &Config::default(),
        Auth::none(),
        |service| service.with_webhooks(webhooks(format!("http://{hanging}/hook"), true)),
    )
    .await;
    let thread = uuid::Uuid::new_v4().to_string();
    for run in ["h1", "h2", "h3"] {
        assert_eq!(
            post(server.addr, &body(&thread, run, "hi"), None)
                .await
                .status(),
            202
        );
        wait_status(server.addr, run, "succeeded").await;
    }
    // The hanging attempts give up at the request timeout and count as
    // failed (without a timeout they would hang on and never count).
    until(
        "the hanging attempts time out",
        Duration::from_secs(30),
        async || {
            metrics(server.addr).await.lines().any(|l| {
                l.starts_with("agwire_webhook_deliveries_total{outcome=\"failed\"}")
                    && !l.ends_with(" 0")
            })
        },
    )
    .await;

    // A name that resolves to loopback, without allow_private: refused at
    // every delivery (DNS cannot point a webhook into the service's network).
    let (receiver_addr, seen) = receiver(0, false).await;
    let url = format!("http://localhost:{}/hook", receiver_addr.port());
    let server = start_on(
        Database::fresh("webhooks-private").await,
        &Config::default(),
        Auth::none(),
        |service| service.with_webhooks(webhooks(url, false)),
    )
    .await;
    assert_eq!(
        post(server.addr, &body(&thread, "p1", "hi"), None)
            .await
            .status(),
        202
    );
    wait_status(server.addr, "p1", "succeeded").await;
    until("refused and counted", Duration::from_secs(30), async || {
        metrics(server.addr)
            .await
            .contains("agwire_webhook_deliveries_total{outcome=\"failed\"} 1\n")
    })
    .await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the receiver"
    );
}
