//! The webhook outbox, on every backend: a message for every run end while
//! enabled (whichever way the run ends), none while disabled, claims that
//! lease, retries and giving up.

use super::*;

async fn claim(store: &dyn Store, now_ms: i64) -> Vec<agwire_service::store::WebhookMessage> {
    store.claim_webhooks(now_ms, 1_000, 100).await.unwrap()
}

#[tokio::test]
async fn every_run_end_writes_one_message_while_enabled() {
    for (backend, store, _database) in backends().await {
        // Disabled (the default): a run ends, nothing is written.
        let t = thread();
        turn(&*store, "alice", &input(&t, "w0", "quiet"), 10, &[])
            .await
            .unwrap();
        assert_eq!(store.webhooks_pending().await.unwrap(), 0, "{backend}");

        store.set_webhooks_enabled(true).await.unwrap();
        // Ended by its executor…
        turn(&*store, "alice", &input(&t, "w1", "hello"), 20, &[])
            .await
            .unwrap();
        // …cancelled while it waited…
        let running = input(&t, "w2", "long");
        store
            .accept_run(new_run("alice", &running, "w2"))
            .await
            .unwrap();
        claim_all(&*store).await;
        let waiting = input(&t, "w3", "next");
        let queued = store
            .accept_run(queued_behind("alice", &waiting, "w3"))
            .await
            .unwrap();
        let log = agwire_service::store::cancelled_log(&t, "w3");
        assert!(
            store
                .cancel_queued(&queued.task_id, &log, 30)
                .await
                .unwrap()
                .is_some()
        );
        // …and ended as failed.
        let w2 = store.run("alice", "w2").await.unwrap().unwrap();
        let error = Event::RunError(RunErrorEvent::new("model down"));
        end(&*store, &w2.task_id, &error, &[]).await;
        assert_eq!(store.webhooks_pending().await.unwrap(), 3, "{backend}");

        let mut messages = claim(&*store, 1_000).await;
        messages.sort_by(|a, b| a.id.cmp(&b.id));
        let mut kinds: Vec<(String, String)> = messages
            .iter()
            .map(|m| {
                let payload: serde_json::Value = serde_json::from_str(&m.payload).unwrap();
                assert_eq!(
                    m.id,
                    format!("msg_{}", payload["data"]["taskId"].as_str().unwrap())
                );
                assert_eq!(m.attempts, 1, "{backend}");
                assert!(
                    payload["timestamp"].as_str().unwrap().ends_with('Z'),
                    "{payload}"
                );
                (
                    payload["data"]["runId"].as_str().unwrap().to_owned(),
                    payload["type"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        kinds.sort();
        assert_eq!(
            kinds,
            [
                ("w1".to_owned(), "run.succeeded".to_owned()),
                ("w2".to_owned(), "run.failed".to_owned()),
                ("w3".to_owned(), "run.cancelled".to_owned()),
            ],
            "{backend}"
        );
        // Leased: nobody else takes them until the lease runs out.
        assert!(claim(&*store, 1_500).await.is_empty(), "{backend}");

        // One delivered, one to retry at 5 000, one given up.
        let (a, b, c) = (&messages[0].id, &messages[1].id, &messages[2].id);
        store.webhook_delivered(a, 1_600).await.unwrap();
        store
            .webhook_failed(b, "HTTP 500", Some(5_000), 1_600)
            .await
            .unwrap();
        store
            .webhook_failed(c, "HTTP 410", None, 1_600)
            .await
            .unwrap();
        assert_eq!(store.webhooks_pending().await.unwrap(), 1, "{backend}");
        assert!(claim(&*store, 4_999).await.is_empty(), "{backend}");
        let again = claim(&*store, 5_000).await;
        assert_eq!(again.len(), 1, "{backend}");
        assert_eq!((&again[0].id, again[0].attempts), (b, 2), "{backend}");
        // The same body on every attempt.
        assert_eq!(again[0].payload, messages[1].payload, "{backend}");
        // A lease that ran out (its process died mid-delivery): taken again.
        let retaken = claim(&*store, 6_000).await;
        assert_eq!(retaken.len(), 1, "{backend}");
        assert_eq!(retaken[0].attempts, 3, "{backend}");

        store.set_webhooks_enabled(false).await.unwrap();
        turn(&*store, "alice", &input(&t, "w4", "off"), 40, &[])
            .await
            .unwrap();
        assert_eq!(store.webhooks_pending().await.unwrap(), 1, "{backend}");

        // Pruning takes the messages done with before the time given (the
        // delivered and the given up, both done at 1 600), in bounded
        // batches, and never one still to deliver.
        assert_eq!(
            store.prune_webhooks(1_600, 10).await.unwrap(),
            0,
            "{backend}"
        );
        assert_eq!(
            store.prune_webhooks(1_601, 1).await.unwrap(),
            1,
            "{backend}"
        );
        assert_eq!(
            store.prune_webhooks(1_601, 10).await.unwrap(),
            1,
            "{backend}"
        );
        assert_eq!(
            store.prune_webhooks(i64::MAX, 10).await.unwrap(),
            0,
            "{backend}"
        );
        assert_eq!(store.webhooks_pending().await.unwrap(), 1, "{backend}");
        store.webhook_delivered(b, 7_000).await.unwrap();
        assert_eq!(
            store.prune_webhooks(7_001, 10).await.unwrap(),
            1,
            "{backend}"
        );
        assert!(claim(&*store, i64::MAX / 2).await.is_empty(), "{backend}");
    }
}

/// Two claimers at once (on PostgreSQL two replicas) never take one message
/// both.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_claimers_never_take_one_message_both() {
    for (backend, store, database) in backends().await {
        let other: Arc<dyn Store> = match &database {
            Some(database) => Arc::new(PgStore::connect(&database.url).await.unwrap()),
            None => store.clone(),
        };
        store.set_webhooks_enabled(true).await.unwrap();
        for i in 0..40 {
            let t = thread();
            turn(
                &*store,
                "alice",
                &input(&t, &format!("c{i}"), "hi"),
                10,
                &[],
            )
            .await
            .unwrap();
        }
        let mut taken = Vec::new();
        loop {
            let (a, b) = tokio::join!(
                store.claim_webhooks(1_000, 60_000, 3),
                other.claim_webhooks(1_000, 60_000, 3)
            );
            let (a, b) = (a.unwrap(), b.unwrap());
            if a.is_empty() && b.is_empty() {
                break;
            }
            taken.extend(a.into_iter().chain(b).map(|m| m.id));
        }
        let unique: std::collections::BTreeSet<&String> = taken.iter().collect();
        assert_eq!((taken.len(), unique.len()), (40, 40), "{backend}");
    }
}
