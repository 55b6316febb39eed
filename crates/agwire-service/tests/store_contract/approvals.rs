//! Approvals that expire, on every backend: a pending frontend tool call
//! past its expiry is no longer listed, an answer to it is refused (and
//! nothing of that turn is kept), a later turn leaves it expired, and the
//! sweep marks it once.

use super::*;

async fn pending_at(store: &dyn Store, thread: &str, now_ms: i64) -> Vec<(String, Option<i64>)> {
    store
        .pending_tool_calls(thread, now_ms)
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.tool_call_id, c.expires_at))
        .collect()
}

#[tokio::test]
async fn an_approval_past_its_expiry_is_unlisted_refused_and_swept_once() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        turn_until(
            &*store,
            "alice",
            &input(&t, "e1", "book it"),
            10,
            &["c1"],
            Some(100),
        )
        .await
        .unwrap();
        assert_eq!(
            pending_at(&*store, &t, 99).await,
            [("c1".to_owned(), Some(100))],
            "{backend}"
        );
        // Expired at its expiry instant: no longer listed.
        assert!(pending_at(&*store, &t, 100).await.is_empty(), "{backend}");
        let before = texts(&*store, &t).await;

        // An answer after the expiry: refused, nothing of the turn kept.
        let late = turn(&*store, "alice", &answering(&t, "e2", &["c1"]), 150, &[]).await;
        assert!(
            matches!(late, Err(Error::ToolCallExpired { ref tool_call_id }) if tool_call_id == "c1"),
            "{backend}: {late:?}"
        );
        assert!(
            store.run("alice", "e2").await.unwrap().is_none(),
            "{backend}"
        );
        assert_eq!(texts(&*store, &t).await, before, "{backend}");

        // The sweep marks it once, whatever the clock says after.
        assert_eq!(store.expire_tool_calls(150).await.unwrap(), 1, "{backend}");
        assert_eq!(store.expire_tool_calls(160).await.unwrap(), 0, "{backend}");
        assert!(
            pending_at(&*store, &t, 0).await.is_empty(),
            "{backend}: swept for good"
        );

        // A turn that goes on without answering leaves it expired (not
        // "closed"): a late answer still hears why.
        turn(&*store, "alice", &input(&t, "e3", "never mind"), 170, &[])
            .await
            .unwrap();
        let later = turn(&*store, "alice", &answering(&t, "e4", &["c1"]), 180, &[]).await;
        assert!(
            matches!(later, Err(Error::ToolCallExpired { .. })),
            "{backend}: {later:?}"
        );

        // Answered in time: accepted, and the sweep leaves it alone.
        let on_time = thread();
        turn_until(
            &*store,
            "alice",
            &input(&on_time, "o1", "book"),
            10,
            &["c2"],
            Some(100),
        )
        .await
        .unwrap();
        turn(
            &*store,
            "alice",
            &answering(&on_time, "o2", &["c2"]),
            99,
            &[],
        )
        .await
        .unwrap();
        assert_eq!(
            store.expire_tool_calls(1_000).await.unwrap(),
            0,
            "{backend}"
        );

        // A call asked again (its id reused by a later run) is pending
        // again, with the new expiry.
        turn_until(
            &*store,
            "alice",
            &input(&t, "e5", "again"),
            200,
            &["c1"],
            Some(300),
        )
        .await
        .unwrap();
        assert_eq!(
            pending_at(&*store, &t, 250).await,
            [("c1".to_owned(), Some(300))],
            "{backend}"
        );

        // A call without an expiry (asked before expiry existed) never
        // expires.
        let old = thread();
        turn(&*store, "alice", &input(&old, "n1", "book"), 10, &["c3"])
            .await
            .unwrap();
        assert_eq!(
            pending_at(&*store, &old, i64::MAX).await,
            [("c3".to_owned(), None)],
            "{backend}"
        );
    }
}
