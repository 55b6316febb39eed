//! The SQLite store on a real database file: acceptance rules, idempotent
//! re-posts, ownership, one active run per thread under concurrency, the
//! event log, final states, and surviving a reopen.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns

use std::path::PathBuf;

use agwire_client::core::RunAgentInput;
use agwire_core::{BaseEvent, Event, RunStartedEvent, TextMessageContentEvent};
use agwire_service::Error;
use agwire_service::store::Admission;
use agwire_service::store::Store;
use agwire_service::validate::{Rules, validate_run};
use serde_json::json;

const THREAD: &str = "550e8400-e29b-41d4-a716-446655440000";

fn temp_db() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agwire-store-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("agwire.db")
}

fn run(thread: &str, run_id: &str, text: &str) -> RunAgentInput {
    let body = json!({
        "threadId": thread, "runId": run_id,
        "messages": [{"id": format!("{run_id}-u"), "role": "user", "content": text}],
        "forwardedProps": {"runtime_mode": "chat"}
    });
    validate_run(body.to_string().as_bytes(), &Rules::default())
        .unwrap()
        .input
}

#[tokio::test]
async fn accepts_creates_threads_and_replays_identical_reposts() {
    let store = Store::open(&temp_db()).await.unwrap();
    let first = store
        .accept_run(
            "alice",
            &run(THREAD, "r1", "hi"),
            "h1",
            Admission::default(),
            1,
        )
        .await
        .unwrap();
    assert!(first.created && !first.replayed);
    // Same body again: the original answer, nothing new.
    let again = store
        .accept_run(
            "alice",
            &run(THREAD, "r1", "hi"),
            "h1",
            Admission::default(),
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        (again.task_id.as_str(), again.created, again.replayed),
        (first.task_id.as_str(), true, true)
    );
    // Same ids, another body: conflict. Same run id on another thread: conflict.
    let err = store
        .accept_run(
            "alice",
            &run(THREAD, "r1", "bye"),
            "h2",
            Admission::default(),
            3,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    let other_thread = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
    let err = store
        .accept_run(
            "alice",
            &run(other_thread, "r1", "hi"),
            "h1",
            Admission::default(),
            3,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    // Busy while r1 is active; accepted once it finished, on the same thread.
    let err = store
        .accept_run(
            "alice",
            &run(THREAD, "r2", "more"),
            "h3",
            Admission::default(),
            4,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err}");
    assert!(
        store
            .set_status(&first.task_id, "succeeded", 5)
            .await
            .unwrap()
    );
    let second = store
        .accept_run(
            "alice",
            &run(THREAD, "r2", "more"),
            "h3",
            Admission::default(),
            6,
        )
        .await
        .unwrap();
    assert!(!second.created && !second.replayed);
    assert_eq!(
        store.run_status("alice", "r2").await.unwrap().as_deref(),
        Some("queued")
    );
    // Another user's thread does not exist for bob, and bob cannot see alice's runs.
    let err = store
        .accept_run(
            "bob",
            &run(THREAD, "r9", "hi"),
            "h9",
            Admission::default(),
            7,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");
    assert_eq!(store.run_status("bob", "r1").await.unwrap(), None);
}

#[tokio::test]
async fn one_active_run_per_thread_even_under_concurrency() {
    let store = Store::open(&temp_db()).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .accept_run(
                    "alice",
                    &run(THREAD, &format!("r{i}"), "hi"),
                    &format!("h{i}"),
                    Admission::default(),
                    i,
                )
                .await
        }));
    }
    let mut accepted = 0;
    let mut created = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(a) => {
                accepted += 1;
                created += usize::from(a.created);
            }
            Err(Error::Busy(_)) => {}
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!((accepted, created), (1, 1));
}

#[tokio::test]
async fn the_event_log_numbers_events_and_resumes_after_any_point() {
    let store = Store::open(&temp_db()).await.unwrap();
    let accepted = store
        .accept_run(
            "alice",
            &run(THREAD, "r1", "hi"),
            "h",
            Admission::default(),
            1,
        )
        .await
        .unwrap();
    let mut events = vec![Event::RunStarted(RunStartedEvent {
        thread_id: THREAD.into(),
        run_id: "r1".into(),
        parent_run_id: None,
        protocol_version: None,
        input: None,
        base: BaseEvent::default(),
    })];
    events.extend((0..10).map(|i| {
        Event::TextMessageContent(TextMessageContentEvent {
            message_id: "m".into(),
            delta: format!("{i} "),
            subagent_run_id: None,
            base: BaseEvent::default(),
        })
    }));
    for (i, event) in events.iter().enumerate() {
        assert_eq!(
            store.append_event(&accepted.task_id, event).await.unwrap(),
            i as u64 + 1
        );
    }
    for cut in 0..=events.len() {
        let rest = store
            .events_after(&accepted.task_id, cut as u64)
            .await
            .unwrap();
        let seqs: Vec<u64> = rest.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            seqs,
            ((cut as u64 + 1)..=events.len() as u64).collect::<Vec<_>>()
        );
        let got: Vec<Event> = rest.into_iter().map(|(_, e)| e).collect();
        assert_eq!(got, events[cut..]);
    }
}

#[tokio::test]
async fn final_states_are_never_overwritten_and_data_survives_reopening() {
    let path = temp_db();
    let store = Store::open(&path).await.unwrap();
    let accepted = store
        .accept_run(
            "alice",
            &run(THREAD, "r1", "hi"),
            "h",
            Admission::default(),
            1,
        )
        .await
        .unwrap();
    assert!(
        store
            .set_status(&accepted.task_id, "running", 2)
            .await
            .unwrap()
    );
    assert!(
        store
            .set_status(&accepted.task_id, "cancelled", 3)
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_status(&accepted.task_id, "succeeded", 4)
            .await
            .unwrap()
    );
    drop(store);
    let reopened = Store::open(&path).await.unwrap();
    assert_eq!(
        reopened.run_status("alice", "r1").await.unwrap().as_deref(),
        Some("cancelled")
    );
    let again = reopened
        .accept_run(
            "alice",
            &run(THREAD, "r1", "hi"),
            "h",
            Admission::default(),
            5,
        )
        .await
        .unwrap();
    assert!(again.replayed);
}

#[tokio::test]
async fn batches_continue_the_numbering() {
    let store = Store::open(&temp_db()).await.unwrap();
    let accepted = store
        .accept_run(
            "alice",
            &run(THREAD, "r1", "hi"),
            "h",
            Admission::default(),
            1,
        )
        .await
        .unwrap();
    let event = |i: usize| {
        Event::TextMessageContent(TextMessageContentEvent {
            message_id: "m".into(),
            delta: format!("{i}"),
            subagent_run_id: None,
            base: BaseEvent::default(),
        })
    };
    assert_eq!(
        store
            .append_event(&accepted.task_id, &event(0))
            .await
            .unwrap(),
        1
    );
    let batch: Vec<Event> = (1..5).map(event).collect();
    assert_eq!(
        store
            .append_events(&accepted.task_id, &batch)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store
            .append_event(&accepted.task_id, &event(5))
            .await
            .unwrap(),
        6
    );
    let all = store.events_after(&accepted.task_id, 0).await.unwrap();
    assert_eq!(
        all.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(
        all.into_iter().map(|(_, e)| e).collect::<Vec<_>>(),
        (0..6).map(event).collect::<Vec<_>>()
    );
}
