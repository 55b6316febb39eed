//! Per-user quotas in `RunStore::accept_run`, on every backend: runs in a
//! sliding minute and tokens in a UTC day, counted by the store (so every
//! replica counts together), each refusal before anything is written.

use agwire_service::store::{DAY_MS, Quota, Quotas, Usage};

use super::*;

/// `run` posted by `user` at `now_ms` under `quotas`.
fn limited<'a>(
    user: &'a str,
    input: &'a RunAgentInput,
    hash: &'a str,
    now_ms: i64,
    quotas: Quotas,
) -> NewRun<'a> {
    NewRun {
        quotas,
        now_ms,
        ..new_run(user, input, hash)
    }
}

const THREE_A_MINUTE: Quotas = Quotas {
    runs_per_minute: Some(3),
    tokens_per_day: None,
};

/// Noon, UTC, on some day.
const NOON: i64 = 20_000 * DAY_MS + DAY_MS / 2;

/// Ends a running run with `tokens` of usage at `now_ms`.
async fn end_using(store: &dyn Store, task_id: &str, thread: &str, tokens: u64, now_ms: i64) {
    let terminal = finished(thread, "x");
    let usage = json!([{"inputTokens": tokens, "outputTokens": 0}]);
    let ending = Ending {
        status: RunStatus::Succeeded,
        error: None,
        usage: Some(&usage),
        events: &[],
        terminal: &terminal,
        output: &[],
        ui_schema: None,
        calls_expire_at: None,
        tokens,
    };
    assert!(
        store
            .end_run(task_id, &ending, now_ms)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn runs_past_the_minute_quota_are_refused_until_the_oldest_leaves_the_window() {
    for (backend, store, _database) in backends().await {
        let runs: Vec<(String, RunAgentInput)> = (0..3)
            .map(|i| {
                let t = thread();
                let run = input(&t, &format!("q{i}"), "hello");
                (t, run)
            })
            .collect();
        for (i, (_, run)) in runs.iter().enumerate() {
            let at = NOON + i64::try_from(i).unwrap() * 1000;
            store
                .accept_run(limited("alice", run, "h", at, THREE_A_MINUTE))
                .await
                .unwrap_or_else(|e| panic!("{backend}: run {i}: {e}"));
        }
        // The fourth, ten seconds after the first: refused, and told to come
        // back when the first leaves the minute.
        let t4 = thread();
        let fourth = input(&t4, "q3", "one too many");
        let refused = store
            .accept_run(limited(
                "alice",
                &fourth,
                "h",
                NOON + 10_000,
                THREE_A_MINUTE,
            ))
            .await
            .unwrap_err();
        match refused {
            Error::QuotaExceeded {
                quota: Quota::RunsPerMinute(3),
                retry_after_ms: 50_000,
            } => {}
            other => panic!("{backend}: {other:?}"),
        }
        assert!(
            store.thread("alice", &t4).await.unwrap().is_none(),
            "{backend}: a refused run writes nothing (not even its new thread)"
        );
        assert!(
            store.run("alice", "q3").await.unwrap().is_none(),
            "{backend}"
        );
        // A re-post of an accepted run is answered again, quota or not.
        let again = store
            .accept_run(limited(
                "alice",
                &runs[2].1,
                "h",
                NOON + 10_000,
                THREE_A_MINUTE,
            ))
            .await
            .unwrap();
        assert!(again.replayed, "{backend}");
        // Another user has a minute of their own.
        let bob = input(&thread(), "b0", "hi");
        store
            .accept_run(limited("bob", &bob, "h", NOON + 10_000, THREE_A_MINUTE))
            .await
            .unwrap();
        assert_eq!(
            store.usage("alice", NOON + 10_000).await.unwrap(),
            Usage {
                runs_last_minute: 3,
                tokens_today: 0
            },
            "{backend}"
        );
        // A minute after the first, there is room for one.
        store
            .accept_run(limited(
                "alice",
                &fourth,
                "h",
                NOON + 60_000,
                THREE_A_MINUTE,
            ))
            .await
            .unwrap_or_else(|e| panic!("{backend}: {e}"));
        let t5 = thread();
        let fifth = input(&t5, "q4", "and another");
        assert!(
            matches!(
                store
                    .accept_run(limited("alice", &fifth, "h", NOON + 60_001, THREE_A_MINUTE))
                    .await,
                Err(Error::QuotaExceeded {
                    retry_after_ms: 999,
                    ..
                })
            ),
            "{backend}"
        );
        // Without a quota nothing is counted against.
        store
            .accept_run(limited(
                "alice",
                &fifth,
                "h",
                NOON + 60_001,
                Quotas::default(),
            ))
            .await
            .unwrap();
        // An accept whose clock is behind the runs it is refused for (it
        // read its clock, then waited for the user's lock while another
        // replica accepted): told to wait the window, never longer.
        for i in 0..3 {
            let run = input(&thread(), &format!("c{i}"), "hi");
            store
                .accept_run(limited("carol", &run, "h", NOON + 20_000, THREE_A_MINUTE))
                .await
                .unwrap_or_else(|e| panic!("{backend}: {e}"));
        }
        let late = input(&thread(), "c3", "hi");
        match store
            .accept_run(limited("carol", &late, "h", NOON + 19_995, THREE_A_MINUTE))
            .await
        {
            Err(Error::QuotaExceeded {
                retry_after_ms: 60_000,
                ..
            }) => {}
            other => panic!("{backend}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_day_s_tokens_are_counted_from_run_ends_and_refuse_until_midnight() {
    let quotas = Quotas {
        runs_per_minute: None,
        tokens_per_day: Some(150),
    };
    for (backend, store, _database) in backends().await {
        let t = thread();
        let first = input(&t, "k1", "first");
        let a1 = store
            .accept_run(limited("alice", &first, "h", NOON, quotas))
            .await
            .unwrap();
        claim_all(&*store).await;
        end_using(&*store, &a1.task_id, &t, 100, NOON + 1).await;
        // Another user's tokens are not alice's.
        let bob_thread = thread();
        let bob = input(&bob_thread, "kb", "bob");
        let b = store
            .accept_run(limited("bob", &bob, "h", NOON, quotas))
            .await
            .unwrap();
        claim_all(&*store).await;
        end_using(&*store, &b.task_id, &bob_thread, 1000, NOON + 1).await;

        let second = input(&t, "k2", "second");
        let a2 = store
            .accept_run(limited("alice", &second, "h", NOON + 2, quotas))
            .await
            .unwrap_or_else(|e| panic!("{backend}: 100 of 150: {e}"));
        claim_all(&*store).await;
        end_using(&*store, &a2.task_id, &t, 60, NOON + 3).await;
        assert_eq!(
            store.usage("alice", NOON + 4).await.unwrap().tokens_today,
            160,
            "{backend}"
        );

        let third = input(&t, "k3", "third");
        match store
            .accept_run(limited("alice", &third, "h", NOON + 4, quotas))
            .await
        {
            Err(Error::QuotaExceeded {
                quota: Quota::TokensPerDay(150),
                retry_after_ms,
            }) => assert_eq!(retry_after_ms, DAY_MS / 2 - 4, "{backend}: until midnight"),
            other => panic!("{backend}: {other:?}"),
        }
        assert!(
            store.run("alice", "k3").await.unwrap().is_none(),
            "{backend}"
        );
        assert_eq!(
            texts(&*store, &t).await,
            ["first", "second"],
            "{backend}: nothing written"
        );
        // A new UTC day starts from zero.
        let tomorrow = NOON + DAY_MS / 2;
        assert_eq!(
            store.usage("alice", tomorrow).await.unwrap().tokens_today,
            0,
            "{backend}"
        );
        store
            .accept_run(limited("alice", &third, "h", tomorrow, quotas))
            .await
            .unwrap_or_else(|e| panic!("{backend}: {e}"));
    }
}

/// Accepts from two stores at once — on PostgreSQL two replicas on one
/// database — for one user under a runs quota: exactly the quota's number
/// are accepted, the rest refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn simultaneous_accepts_on_two_replicas_share_one_count() {
    const LIMIT: u32 = 5;
    let quotas = Quotas {
        runs_per_minute: Some(LIMIT),
        tokens_per_day: None,
    };
    for (backend, store, database) in backends().await {
        let other: Arc<dyn Store> = match &database {
            Some(database) => Arc::new(PgStore::connect(&database.url).await.unwrap()),
            None => store.clone(),
        };
        for round in 0..3 {
            let user = format!("racer{round}");
            let inputs: Vec<RunAgentInput> = (0..4 * LIMIT)
                .map(|i| input(&thread(), &format!("r{round}-{i}"), "go"))
                .collect();
            let accepts = inputs.iter().enumerate().map(|(i, run)| {
                let store = if i % 2 == 0 { &store } else { &other };
                store.accept_run(limited(&user, run, "h", NOON + i64::from(round), quotas))
            });
            let answers = futures_util::future::join_all(accepts).await;
            let accepted = answers.iter().filter(|a| a.is_ok()).count();
            let refused = answers
                .iter()
                .filter(|a| matches!(a, Err(Error::QuotaExceeded { .. })))
                .count();
            assert_eq!(
                (accepted, refused),
                (LIMIT as usize, 3 * LIMIT as usize),
                "{backend} round {round}: {:?}",
                answers.iter().filter(|a| a.is_err()).collect::<Vec<_>>()
            );
        }
    }
}
