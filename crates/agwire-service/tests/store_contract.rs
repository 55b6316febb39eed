//! The store contract: what every backend guarantees (atomicity, ordering,
//! ownership), checked against each backend on a real database. The run
//! engine and the API rely on exactly these rules; a new backend passes this
//! file before it is used.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // helpers outside #[test] fns; skips are announced

mod approvals;
mod grouped;
mod multitask;
mod quotas;
mod webhooks;

use std::sync::{Arc, Mutex};

use agwire_core::{
    Event, Message, RunAgentInput, RunErrorEvent, RunFinishedEvent, TextMessageContentEvent,
};
use agwire_service::run::{Admission, MultitaskStrategy, RunOptions, RunStatus};
use agwire_service::store::Error;
use agwire_service::store::{
    AttachmentStore, CalendarEvent, Claimed, Ending, JobRecord, NewRun, OnClaim, PgStore, RunStore,
    SqliteStore, Store, run_started,
};
use agwire_service::validate::{Rules, validate_run};
use agwire_testkit::pg::PgDatabase;
use serde_json::json;

/// Every backend, each on a fresh database of its own (dropped with the
/// third element).
async fn backends() -> Vec<(&'static str, Arc<dyn Store>, Option<PgDatabase>)> {
    let dir = std::env::temp_dir().join(format!("agwire-contract-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let sqlite = SqliteStore::open(&dir.join("agwire.db")).await.unwrap();
    let mut backends: Vec<(&'static str, Arc<dyn Store>, Option<PgDatabase>)> =
        vec![("sqlite", Arc::new(sqlite), None)];
    if let Some(database) = PgDatabase::create().await {
        let store = PgStore::connect(&database.url).await.unwrap();
        backends.push(("postgres", Arc::new(store), Some(database)));
    }
    backends
}

fn thread() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// An agent-run API request of one user message.
fn input(thread: &str, run_id: &str, text: &str) -> RunAgentInput {
    let body = json!({
        "threadId": thread, "runId": run_id,
        "messages": [{"id": format!("{run_id}-u"), "role": "user", "content": text}],
        "forwardedProps": {"runtime_mode": "chat"}
    });
    validate_run(body.to_string().as_bytes(), &Rules::default())
        .unwrap()
        .input
}

fn new_run<'a>(user: &'a str, input: &'a RunAgentInput, hash: &'a str) -> NewRun<'a> {
    NewRun {
        user,
        input,
        request_hash: hash,
        mode: None,
        options: &RunOptions::NONE,
        admission: Admission::default(),
        quotas: Default::default(),
        now_ms: 1,
        start: None,
    }
}

fn queued_behind<'a>(user: &'a str, input: &'a RunAgentInput, hash: &'a str) -> NewRun<'a> {
    NewRun {
        admission: Admission {
            strategy: MultitaskStrategy::Enqueue,
            whole_history: false,
        },
        ..new_run(user, input, hash)
    }
}

/// What an accept that may start its run here holds, registering nothing.
fn start_here() -> agwire_service::store::StartHere {
    agwire_service::store::StartHere {
        register: Arc::new(|_: &str| {}),
        forget: Arc::new(|_: &str| {}),
    }
}

async fn claim_all(store: &dyn Store) -> Vec<Claimed> {
    let nothing: OnClaim = Arc::new(|_: &str| {});
    store
        .claim_runnable(100, 2, nothing.clone(), nothing)
        .await
        .unwrap()
}

fn text(i: usize) -> Event {
    Event::TextMessageContent(TextMessageContentEvent::new("m", format!("{i} ")))
}

fn finished(thread: &str, run_id: &str) -> Event {
    Event::RunFinished(RunFinishedEvent::new(thread, run_id))
}

async fn end(
    store: &dyn Store,
    task_id: &str,
    terminal: &Event,
    output: &[Message],
) -> Option<u64> {
    let status = match terminal {
        Event::RunError(_) => RunStatus::Failed,
        _ => RunStatus::Succeeded,
    };
    let ending = Ending {
        status,
        error: None,
        usage: None,
        events: &[],
        terminal,
        output,
        ui_schema: None,
        calls_expire_at: None,
        tokens: 0,
    };
    store.end_run(task_id, &ending, 3).await.unwrap()
}

/// A run's whole log, its events without their numbers.
async fn whole_log(store: &dyn Store, task_id: &str) -> Vec<Event> {
    store
        .events_after(task_id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, e)| e)
        .collect()
}

async fn texts(store: &dyn Store, thread: &str) -> Vec<String> {
    store
        .thread_messages(thread, &["user", "assistant"])
        .await
        .unwrap()
        .into_iter()
        .map(|m| match m.message {
            Message::User(u) => u.content.text(),
            Message::Assistant(a) => a.content.unwrap_or_default(),
            _ => String::new(),
        })
        .collect()
}

// The accept rules, one test each. SQLite writes them in Rust
// (agwire-store's src/sqlite/write.rs), PostgreSQL in PL/pgSQL
// (src/postgres/functions.sql, `agwire_accept`): each test holds both
// to the same rule.

#[tokio::test]
async fn accept_rule_a_repost_answers_the_original_acceptance() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let r1 = input(&t, "r1", "hi");
        let first = store.accept_run(new_run("alice", &r1, "h1")).await.unwrap();
        assert!(
            first.created && !first.replayed && !first.waiting,
            "{backend}"
        );
        // The same request again: the original answer, nothing new stored.
        let again = store.accept_run(new_run("alice", &r1, "h1")).await.unwrap();
        assert_eq!(
            (again.task_id.as_str(), again.created, again.replayed),
            (first.task_id.as_str(), true, true),
            "{backend}"
        );
        assert_eq!(texts(&*store, &t).await, ["hi"], "{backend}");
        assert_eq!(
            store.thread_runs(&t, 10).await.unwrap().len(),
            1,
            "{backend}"
        );
    }
}

#[tokio::test]
async fn accept_rule_a_run_id_reused_with_another_request_is_refused() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let r1 = input(&t, "r1", "hi");
        store.accept_run(new_run("alice", &r1, "h1")).await.unwrap();
        // Same run id, another body or another thread: conflict.
        let other_body = input(&t, "r1", "bye");
        let err = store.accept_run(new_run("alice", &other_body, "h2")).await;
        assert!(
            matches!(err, Err(Error::RunIdReused { .. })),
            "{backend}: {err:?}"
        );
        let elsewhere = thread();
        let other_thread = input(&elsewhere, "r1", "hi");
        let err = store
            .accept_run(new_run("alice", &other_thread, "h1"))
            .await;
        assert!(
            matches!(err, Err(Error::RunIdReused { .. })),
            "{backend}: {err:?}"
        );
        // Nothing was written by the refusals.
        assert_eq!(texts(&*store, &t).await, ["hi"], "{backend}");
        assert_eq!(
            store.thread_owner(&elsewhere).await.unwrap(),
            None,
            "{backend}"
        );
    }
}

#[tokio::test]
async fn accept_rule_another_users_thread_does_not_exist() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let r1 = input(&t, "r1", "hi");
        store.accept_run(new_run("alice", &r1, "h1")).await.unwrap();
        // Another user's thread does not exist for bob; the same run id is
        // bob's own to use.
        let bobs = input(&t, "r1", "hi");
        let err = store.accept_run(new_run("bob", &bobs, "h1")).await;
        assert!(
            matches!(err, Err(Error::ThreadNotFound)),
            "{backend}: {err:?}"
        );
        assert_eq!(store.run("bob", "r1").await.unwrap(), None, "{backend}");
        assert_eq!(texts(&*store, &t).await, ["hi"], "{backend}");
    }
}

#[tokio::test]
async fn accept_rule_a_busy_thread_refuses_the_run_or_queues_it() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let r1 = input(&t, "r1", "hi");
        store.accept_run(new_run("alice", &r1, "h1")).await.unwrap();
        // Busy while r1 is active; with `enqueue`, accepted as waiting.
        let r2 = input(&t, "r2", "more");
        let err = store.accept_run(new_run("alice", &r2, "h3")).await;
        assert!(matches!(err, Err(Error::ThreadBusy)), "{backend}: {err:?}");
        assert_eq!(store.run("alice", "r2").await.unwrap(), None, "{backend}");
        let waiting = store
            .accept_run(queued_behind("alice", &r2, "h3"))
            .await
            .unwrap();
        assert!(waiting.waiting && !waiting.created, "{backend}");
        // Its message is kept aside until it runs.
        assert_eq!(texts(&*store, &t).await, ["hi"], "{backend}");
        let run = store.run("alice", "r2").await.unwrap().unwrap();
        assert_eq!(
            (run.status, run.user_id.as_str()),
            (RunStatus::Queued, "alice"),
            "{backend}"
        );
        assert_eq!(
            store.thread_runs(&t, 10).await.unwrap().len(),
            2,
            "{backend}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_accepts_racing_on_one_idle_thread_never_both_find_it_idle() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let mut tasks = Vec::new();
        for i in 0..20 {
            let (store, t) = (store.clone(), t.clone());
            tasks.push(tokio::spawn(async move {
                let input = input(&t, &format!("r{i}"), "hi");
                store
                    .accept_run(new_run("alice", &input, &format!("h{i}")))
                    .await
            }));
        }
        let (mut accepted, mut created) = (0, 0);
        for task in tasks {
            match task.await.unwrap() {
                Ok(a) => {
                    accepted += 1;
                    created += usize::from(a.created);
                }
                Err(Error::ThreadBusy) => {}
                Err(other) => panic!("{backend}: {other}"),
            }
        }
        assert_eq!((accepted, created), (1, 1), "{backend}");
    }
}

/// A run never reads as started before it was accepted, whatever clock the
/// claim read (a claim's time is read before its round trips, and an
/// accept may commit while it waits).
#[tokio::test]
async fn a_claimed_run_starts_no_earlier_than_it_was_accepted() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let late = input(&t, "late", "hello");
        store
            .accept_run(NewRun {
                now_ms: 1_000,
                ..new_run("alice", &late, "1")
            })
            .await
            .unwrap();
        let nothing: OnClaim = Arc::new(|_: &str| {});
        let claimed = store
            .claim_runnable(10, 500, nothing.clone(), nothing)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1, "{backend}");
        let run = store.run("alice", "late").await.unwrap().unwrap();
        assert_eq!(
            (run.created_at, run.started_at),
            (1_000, Some(1_000)),
            "{backend}"
        );
    }
}

#[tokio::test]
async fn claims_take_the_oldest_run_of_each_idle_thread_and_waiting_turns_join_in_order() {
    for (backend, store, _database) in backends().await {
        let (a, b) = (thread(), thread());
        let a1 = input(&a, "a1", "first");
        let a2 = input(&a, "a2", "second");
        let b1 = input(&b, "b1", "other");
        let accepted_a1 = store.accept_run(new_run("alice", &a1, "1")).await.unwrap();
        store
            .accept_run(queued_behind("alice", &a2, "2"))
            .await
            .unwrap();
        let accepted_b1 = store.accept_run(new_run("alice", &b1, "3")).await.unwrap();
        let registered = Arc::new(Mutex::new(Vec::new()));
        let seen = registered.clone();
        let register: OnClaim =
            Arc::new(move |task: &str| seen.lock().unwrap().push(task.to_owned()));
        let nothing: OnClaim = Arc::new(|_: &str| {});
        let claimed = store
            .claim_runnable(10, 2, register, nothing)
            .await
            .unwrap();
        let mut ids: Vec<&str> = claimed.iter().map(|c| c.input.run_id.as_str()).collect();
        ids.sort_unstable();
        // One run per thread: a2 waits for a1.
        assert_eq!(ids, ["a1", "b1"], "{backend}");
        let mut registered = registered.lock().unwrap().clone();
        registered.sort();
        let mut expected = vec![accepted_a1.task_id.clone(), accepted_b1.task_id.clone()];
        expected.sort();
        assert_eq!(registered, expected, "{backend}");
        assert!(claim_all(&*store).await.is_empty(), "{backend}");
        assert_eq!(
            store.run_status(&accepted_a1.task_id).await.unwrap(),
            Some(RunStatus::Running),
            "{backend}"
        );
        // a1 answers; then a2 is runnable and its message follows the answer.
        let answer = Message::assistant("a1-a", "answer");
        end(
            &*store,
            &accepted_a1.task_id,
            &finished(&a, "a1"),
            &[answer],
        )
        .await;
        let next = claim_all(&*store).await;
        assert_eq!(next.len(), 1, "{backend}");
        assert_eq!(
            (next[0].input.run_id.as_str(), next[0].user_id.as_str()),
            ("a2", "alice"),
            "{backend}"
        );
        assert_eq!(
            texts(&*store, &a).await,
            ["first", "answer", "second"],
            "{backend}"
        );
    }
}

/// The runs an accept's hooks hold as started here: registered and not
/// forgotten since.
fn held(registered: &Mutex<Vec<String>>, forgotten: &Mutex<Vec<String>>) -> Vec<String> {
    let forgotten = forgotten.lock().unwrap();
    let mut held: Vec<String> = registered
        .lock()
        .unwrap()
        .iter()
        .filter(|task| !forgotten.contains(task))
        .cloned()
        .collect();
    held.sort();
    held
}

#[tokio::test]
async fn an_accept_that_may_start_its_run_starts_it_only_on_an_idle_thread() {
    use agwire_service::store::StartHere;
    for (backend, store, _database) in backends().await {
        let registered = Arc::new(Mutex::new(Vec::new()));
        let forgotten = Arc::new(Mutex::new(Vec::new()));
        let (seen, gone) = (registered.clone(), forgotten.clone());
        let start = StartHere {
            register: Arc::new(move |task: &str| seen.lock().unwrap().push(task.to_owned())),
            forget: Arc::new(move |task: &str| gone.lock().unwrap().push(task.to_owned())),
        };
        let a = thread();
        let (a1, a2) = (input(&a, "a1", "first"), input(&a, "a2", "second"));
        let first = store
            .accept_run(NewRun {
                start: Some(&start),
                ..new_run("alice", &a1, "1")
            })
            .await
            .unwrap();
        let started = first.started.clone().expect("an idle thread's run starts");
        assert_eq!(started.task_id, first.task_id, "{backend}");
        assert_eq!(
            (started.user_id.as_str(), started.input.run_id.as_str()),
            ("alice", "a1"),
            "{backend}"
        );
        assert_eq!(
            held(&registered, &forgotten),
            std::slice::from_ref(&first.task_id),
            "{backend}"
        );
        // Started means running, as a claim leaves it: nothing to claim, and
        // its log takes events.
        assert_eq!(
            store.run_status(&first.task_id).await.unwrap(),
            Some(RunStatus::Running),
            "{backend}"
        );
        assert!(claim_all(&*store).await.is_empty(), "{backend}");
        assert_eq!(
            store
                .append_events(&first.task_id, &[run_started(&a, "a1")])
                .await
                .unwrap(),
            1,
            "{backend}"
        );
        // Its message is in the thread at once, as a claimed run's would be.
        assert_eq!(texts(&*store, &a).await, ["first"], "{backend}");
        // A run behind it waits, whatever the caller asked; a re-post is a
        // replay; neither starts anything.
        let second = store
            .accept_run(NewRun {
                start: Some(&start),
                ..queued_behind("alice", &a2, "2")
            })
            .await
            .unwrap();
        assert!(second.waiting && second.started.is_none(), "{backend}");
        let again = store
            .accept_run(NewRun {
                start: Some(&start),
                ..new_run("alice", &a1, "1")
            })
            .await
            .unwrap();
        assert!(again.replayed && again.started.is_none(), "{backend}");
        assert_eq!(
            held(&registered, &forgotten),
            std::slice::from_ref(&first.task_id),
            "{backend}"
        );
        // The waiting run is claimed when the started one ends.
        end(&*store, &first.task_id, &finished(&a, "a1"), &[]).await;
        let next = claim_all(&*store).await;
        assert_eq!(next.len(), 1, "{backend}");
        assert_eq!(next[0].task_id, second.task_id, "{backend}");
        assert_eq!(texts(&*store, &a).await, ["first", "second"], "{backend}");
    }
}

/// A run that creates its thread starts with the history a claim would
/// read back (the latest `HISTORY_WINDOW` of the history roles, oldest
/// first), and an answer to a call a new thread never asked is refused with
/// nothing kept: the accept of a new thread takes no read of it (SQLite).
#[tokio::test]
async fn a_run_that_creates_its_thread_starts_with_the_history_read_back() {
    use agwire_service::store::{Briefing, HISTORY_WINDOW};
    for (backend, store, _database) in backends().await {
        let start = start_here();
        let t = thread();
        // A whole history longer than the window, of every role a client
        // sends; the last a user's.
        let mut messages = Vec::new();
        for i in 0..HISTORY_WINDOW + 6 {
            messages.push(match i % 4 {
                0 => json!({"id": format!("m{i}"), "role": "user", "content": format!("ask {i}")}),
                1 => json!({"id": format!("m{i}"), "role": "assistant", "content": format!("answer {i}")}),
                2 => json!({"id": format!("m{i}"), "role": "system", "content": format!("rule {i}")}),
                _ => json!({"id": format!("m{i}"), "role": "developer", "content": format!("note {i}")}),
            });
        }
        messages.push(json!({"id": "last", "role": "user", "content": "now"}));
        let body = json!({
            "threadId": t, "runId": "whole", "messages": messages,
            "forwardedProps": {"runtime_mode": "chat"}
        });
        // (The standard endpoint's input: a whole history, not one turn.)
        let whole: RunAgentInput = serde_json::from_value(body).unwrap();
        let accepted = store
            .accept_run(NewRun {
                start: Some(&start),
                admission: Admission {
                    strategy: MultitaskStrategy::Reject,
                    whole_history: true,
                },
                ..new_run("alice", &whole, "w")
            })
            .await
            .unwrap();
        assert!(accepted.created, "{backend}");
        let started = accepted.started.expect("a new thread's run starts");
        // It comes with its briefing: no read of its own.
        let briefing = started
            .briefing
            .unwrap_or_else(|| panic!("{backend}: a started run without its briefing"));
        let read_back = store.recent_messages(&t, HISTORY_WINDOW).await.unwrap();
        assert_eq!(read_back.len(), HISTORY_WINDOW as usize, "{backend}");
        assert_eq!(briefing.history, read_back, "{backend}");
        assert_eq!(
            briefing,
            Briefing::read(&*store, "alice", &t, false).await.unwrap(),
            "{backend}"
        );

        // A new thread's turn answering a call nobody asked.
        let fresh = thread();
        let refused = store
            .accept_run(NewRun {
                start: Some(&start),
                ..new_run("alice", &answering(&fresh, "q1", &["c1"]), "q")
            })
            .await;
        assert!(
            matches!(refused, Err(Error::ToolCallNotPending { ref tool_call_id }) if tool_call_id == "c1"),
            "{backend}: {refused:?}"
        );
        assert!(texts(&*store, &fresh).await.is_empty(), "{backend}");
        assert!(
            store.run("alice", "q1").await.unwrap().is_none(),
            "{backend}"
        );
        // The thread was not kept either: the same id is a new thread again.
        let again = store
            .accept_run(new_run("alice", &input(&fresh, "q2", "hello"), "q2"))
            .await
            .unwrap();
        assert!(again.created, "{backend}");
    }
}

/// A run its accept starts comes with its briefing — the owner's settings
/// and the thread's history, this turn included — equal to what reading
/// them after the accept gives, on a new thread and on one with turns
/// before (PostgreSQL answers it from the accept's statement; SQLite reads
/// it in the accept's transaction).
#[tokio::test]
async fn a_run_its_accept_starts_comes_with_its_briefing() {
    use agwire_service::store::Briefing;
    for (backend, store, _database) in backends().await {
        let start = start_here();
        let settings = json!({"timezone": "Europe/Paris", "locale": "fr-FR"});
        store
            .set_settings("carol", settings.as_object().unwrap(), 1)
            .await
            .unwrap();
        let t = thread();
        let mut said = Vec::new();
        for (i, text) in ["first", "second", "third"].into_iter().enumerate() {
            let run_id = format!("b{i}");
            let turn = input(&t, &run_id, text);
            let accepted = store
                .accept_run(NewRun {
                    start: Some(&start),
                    ..new_run("carol", &turn, &run_id)
                })
                .await
                .unwrap();
            assert_eq!(accepted.created, i == 0, "{backend}");
            let started = accepted
                .started
                .unwrap_or_else(|| panic!("{backend}: turn {i} did not start"));
            let briefing = started
                .briefing
                .unwrap_or_else(|| panic!("{backend}: turn {i} started without its briefing"));
            let read = Briefing::read(&*store, "carol", &t, false).await.unwrap();
            assert_eq!(briefing, read, "{backend}: turn {i}");
            said.push(("user".to_owned(), text.to_owned()));
            assert_eq!(
                roles_and_texts(&briefing.history),
                said,
                "{backend}: turn {i}, oldest first"
            );
            let stated: serde_json::Value =
                serde_json::from_str(briefing.settings.as_deref().unwrap()).unwrap();
            assert_eq!(stated, settings, "{backend}");
            finish(&*store, &started.task_id, &t, &run_id).await;
            said.push(("assistant".to_owned(), "answer".to_owned()));
        }
        // An owner without settings: none in the briefing.
        let fresh = thread();
        let accepted = store
            .accept_run(NewRun {
                start: Some(&start),
                ..new_run("dave", &input(&fresh, "d0", "hello"), "d0")
            })
            .await
            .unwrap();
        let briefing = accepted.started.unwrap().briefing.unwrap();
        assert_eq!(briefing.settings, None, "{backend}");
        assert_eq!(
            briefing,
            Briefing::read(&*store, "dave", &fresh, false)
                .await
                .unwrap(),
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_claim_hands_back_what_validation_established() {
    use agwire_service::run::RuntimeMode;
    for (backend, store, _database) in backends().await {
        let t = thread();
        let body = json!({
            "threadId": t, "runId": "r1",
            "messages": [{"id": "u", "role": "user", "content": "hi"}],
            "forwardedProps": {"runtime_mode": "automation", "client_time": {
                "device_timezone": "Asia/Tokyo",
                "client_now_iso": "2026-11-24T09:30:00+09:00",
                "client_epoch_ms": 1_795_480_200_000_i64,
            }}
        });
        let valid = validate_run(body.to_string().as_bytes(), &Rules::default()).unwrap();
        let run = NewRun {
            mode: Some(valid.runtime_mode),
            options: &valid.options,
            ..new_run("alice", &valid.input, "h")
        };
        store.accept_run(run).await.unwrap();
        let claimed = claim_all(&*store).await;
        assert_eq!(claimed.len(), 1, "{backend}");
        assert_eq!(claimed[0].mode, Some(RuntimeMode::Automation), "{backend}");
        let time = claimed[0]
            .options
            .client_time
            .as_ref()
            .expect("client time");
        assert_eq!(time.device_timezone_name, "Asia/Tokyo", "{backend}");
        assert_eq!(time.epoch_ms, 1_795_480_200_000, "{backend}");
        assert_eq!(
            time.now.as_millisecond(),
            valid
                .options
                .client_time
                .as_ref()
                .unwrap()
                .now
                .as_millisecond(),
            "{backend}"
        );
        assert_eq!(claimed[0].input, valid.input, "{backend}");
        // And the run reads back with them.
        let record = store.run("alice", "r1").await.unwrap().unwrap();
        assert_eq!(record.options, valid.options, "{backend}");
    }
}

#[tokio::test]
async fn the_event_log_numbers_events_from_one_and_resumes_after_any_point() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let r1 = input(&t, "r1", "hi");
        let accepted = store.accept_run(new_run("alice", &r1, "h")).await.unwrap();
        claim_all(&*store).await;
        let mut events = vec![run_started(&t, "r1")];
        events.extend((0..9).map(text));
        // One, then a batch, then one: the numbering continues across them.
        assert_eq!(
            store
                .append_events(&accepted.task_id, &events[..1])
                .await
                .unwrap(),
            1,
            "{backend}"
        );
        assert_eq!(
            store
                .append_events(&accepted.task_id, &events[1..9])
                .await
                .unwrap(),
            2,
            "{backend}"
        );
        assert_eq!(
            store
                .append_events(&accepted.task_id, &events[9..])
                .await
                .unwrap(),
            10,
            "{backend}"
        );
        for cut in 0..=events.len() {
            let rest = store
                .events_after(&accepted.task_id, cut as u64)
                .await
                .unwrap();
            let seqs: Vec<u64> = rest.iter().map(|(s, _)| *s).collect();
            assert_eq!(
                seqs,
                ((cut as u64 + 1)..=events.len() as u64).collect::<Vec<_>>(),
                "{backend}"
            );
            let got: Vec<Event> = rest.into_iter().map(|(_, e)| e).collect();
            assert_eq!(got, events[cut..], "{backend}");
        }
    }
}

#[tokio::test]
async fn an_ended_run_has_a_valid_log_and_its_final_state_never_changes() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let r1 = input(&t, "r1", "hi");
        let accepted = store.accept_run(new_run("alice", &r1, "h")).await.unwrap();
        claim_all(&*store).await;
        // Ended before it wrote anything (a crash right after the claim):
        // RUN_STARTED first, then the terminal event.
        let error = Event::RunError(RunErrorEvent::new("restart").code("server_restart"));
        let detail = json!({"message": "restart", "code": "server_restart"});
        let usage = json!({"inputTokens": 3, "outputTokens": 4});
        let ending = Ending {
            status: RunStatus::Failed,
            error: Some(&detail),
            usage: Some(&usage),
            events: &[],
            terminal: &error,
            output: &[],
            ui_schema: None,
            calls_expire_at: None,
            tokens: 0,
        };
        assert_eq!(
            store.end_run(&accepted.task_id, &ending, 3).await.unwrap(),
            Some(2),
            "{backend}"
        );
        let log = whole_log(&*store, &accepted.task_id).await;
        assert_eq!(log, [run_started(&t, "r1"), error.clone()], "{backend}");
        let record = store.run("alice", "r1").await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::Failed, "{backend}");
        assert_eq!(record.finished_at, Some(3), "{backend}");
        let stored_error: serde_json::Value =
            serde_json::from_str(record.error.as_deref().unwrap()).unwrap();
        assert_eq!(stored_error, detail, "{backend}");
        // A second end writes nothing.
        let answer = Message::assistant("late", "late answer");
        assert_eq!(
            end(&*store, &accepted.task_id, &finished(&t, "r1"), &[answer]).await,
            None,
            "{backend}"
        );
        assert_eq!(
            store.run_status(&accepted.task_id).await.unwrap(),
            Some(RunStatus::Failed),
            "{backend}"
        );
        assert_eq!(
            whole_log(&*store, &accepted.task_id).await.len(),
            2,
            "{backend}"
        );
        assert_eq!(texts(&*store, &t).await, ["hi"], "{backend}");
        // The thread is free again.
        let r2 = input(&t, "r2", "again");
        store.accept_run(new_run("alice", &r2, "h2")).await.unwrap();
    }
}

#[tokio::test]
async fn a_queued_run_is_either_cancelled_or_claimed_never_both() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let r1 = input(&t, "r1", "first");
        let r2 = input(&t, "r2", "second");
        let first = store.accept_run(new_run("alice", &r1, "1")).await.unwrap();
        let second = store
            .accept_run(queued_behind("alice", &r2, "2"))
            .await
            .unwrap();
        claim_all(&*store).await;
        let log = [run_started(&t, "r2"), finished(&t, "r2")];
        // The running one cannot be cancelled as queued.
        assert_eq!(
            store.cancel_queued(&first.task_id, &log, 3).await.unwrap(),
            None,
            "{backend}"
        );
        assert_eq!(
            store.cancel_queued(&second.task_id, &log, 3).await.unwrap(),
            Some(1),
            "{backend}"
        );
        assert_eq!(
            store.run_status(&second.task_id).await.unwrap(),
            Some(RunStatus::Cancelled),
            "{backend}"
        );
        end(&*store, &first.task_id, &finished(&t, "r1"), &[]).await;
        // Never claimed, and its message never reached the thread.
        assert!(claim_all(&*store).await.is_empty(), "{backend}");
        assert_eq!(texts(&*store, &t).await, ["first"], "{backend}");
        assert_eq!(
            store.events_after(&second.task_id, 0).await.unwrap().len(),
            2,
            "{backend}"
        );
    }
}

#[tokio::test]
async fn runs_left_running_are_the_interrupted_ones_and_counts_cover_every_status() {
    for (backend, store, _database) in backends().await {
        let (a, b, c) = (thread(), thread(), thread());
        let (ra, rb, rc) = (
            input(&a, "ra", "x"),
            input(&b, "rb", "y"),
            input(&c, "rc", "z"),
        );
        let ended = store.accept_run(new_run("alice", &ra, "1")).await.unwrap();
        let running = store.accept_run(new_run("alice", &rb, "2")).await.unwrap();
        claim_all(&*store).await;
        store.accept_run(new_run("alice", &rc, "3")).await.unwrap();
        end(&*store, &ended.task_id, &finished(&a, "ra"), &[]).await;
        let interrupted = store.interrupted_runs().await.unwrap();
        if backend == "postgres" {
            // Replicas share the database: a running run is interrupted only
            // once its replica stops renewing its lease (see
            // `a_replica_that_stops_renewing_its_leases_leaves_its_runs_abandoned`);
            // this process holds it.
            assert!(interrupted.is_empty(), "{backend}");
        } else {
            assert_eq!(interrupted.len(), 1, "{backend}");
            assert_eq!(interrupted[0].task_id, running.task_id, "{backend}");
        }
        let mut counts = store.status_counts().await.unwrap();
        counts.sort();
        assert_eq!(
            counts,
            [
                (RunStatus::Queued, 1),
                (RunStatus::Running, 1),
                (RunStatus::Succeeded, 1)
            ],
            "{backend}"
        );
    }
}

fn job(id: &str, user: &str, thread: &str, next: Option<i64>) -> JobRecord {
    JobRecord {
        id: id.into(),
        user_id: user.into(),
        name: "daily".into(),
        schedule: r#"{"every_seconds":3600}"#.into(),
        timezone: "UTC".into(),
        prompt: "summarise".into(),
        config: "{}".into(),
        enabled: true,
        thread_id: thread.into(),
        next_run_at: next,
        created_at: 1,
        updated_at: 1,
    }
}

#[tokio::test]
async fn a_jobs_thread_is_its_owners_from_the_start_and_jobs_are_per_user() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        store
            .create_job(&job("j1", "alice", &t, Some(10)))
            .await
            .unwrap();
        assert_eq!(
            store.thread_owner(&t).await.unwrap().as_deref(),
            Some("alice"),
            "{backend}"
        );
        // Nobody else can post to it.
        let bobs = input(&t, "b1", "mine now");
        let err = store.accept_run(new_run("bob", &bobs, "h")).await;
        assert!(
            matches!(err, Err(Error::ThreadNotFound)),
            "{backend}: {err:?}"
        );
        // A job on a thread in use is refused, and nothing is written.
        let err = store.create_job(&job("j2", "bob", &t, Some(10))).await;
        assert!(
            matches!(err, Err(Error::JobThreadTaken)),
            "{backend}: {err:?}"
        );
        assert_eq!(store.jobs("bob").await.unwrap(), [], "{backend}");
        // Lookups are per user.
        assert!(store.job("bob", "j1").await.unwrap().is_none(), "{backend}");
        assert!(
            store.job_of_thread("bob", &t).await.unwrap().is_none(),
            "{backend}"
        );
        assert_eq!(
            store
                .job_of_thread("alice", &t)
                .await
                .unwrap()
                .map(|j| j.id),
            Some("j1".into()),
            "{backend}"
        );
        // Bob can neither change nor delete it; an update never creates.
        let mut stolen = job("j1", "bob", &thread(), Some(1));
        stolen.prompt = "leak".into();
        assert!(!store.update_job(&stolen).await.unwrap(), "{backend}");
        assert!(
            !store
                .update_job(&job("ghost", "alice", &t, None))
                .await
                .unwrap(),
            "{backend}"
        );
        assert!(
            store.job("alice", "ghost").await.unwrap().is_none(),
            "{backend}"
        );
        assert!(!store.delete_job("bob", "j1").await.unwrap(), "{backend}");
        let kept = store.job("alice", "j1").await.unwrap().unwrap();
        assert_eq!(
            (kept.prompt.as_str(), kept.thread_id.as_str()),
            ("summarise", t.as_str()),
            "{backend}"
        );
        // Alice can; the thread stays hers.
        let mut renamed = kept.clone();
        renamed.name = "weekly".into();
        renamed.updated_at = 2;
        assert!(store.update_job(&renamed).await.unwrap(), "{backend}");
        assert_eq!(store.jobs("alice").await.unwrap(), [renamed], "{backend}");
        assert!(store.delete_job("alice", "j1").await.unwrap(), "{backend}");
        assert_eq!(
            store.thread_owner(&t).await.unwrap().as_deref(),
            Some("alice"),
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_due_tick_is_started_by_one_scheduler_only() {
    for (backend, store, _database) in backends().await {
        store
            .create_job(&job("early", "alice", &thread(), Some(10)))
            .await
            .unwrap();
        store
            .create_job(&job("late", "alice", &thread(), Some(30)))
            .await
            .unwrap();
        store
            .create_job(&job("off", "alice", &thread(), None))
            .await
            .unwrap();
        let due: Vec<String> = store
            .due_jobs(20, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(due, ["early"], "{backend}");
        assert!(
            store.advance_job("early", 10, Some(40)).await.unwrap(),
            "{backend}"
        );
        // A second scheduler with the same tick loses the compare-and-set.
        assert!(
            !store.advance_job("early", 10, Some(40)).await.unwrap(),
            "{backend}"
        );
        let due: Vec<String> = store
            .due_jobs(35, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(due, ["late"], "{backend}");
    }
}

#[tokio::test]
async fn calendar_events_belong_to_one_user() {
    for (backend, store, _database) in backends().await {
        let event = |user: &str, title: &str, start: i64| CalendarEvent {
            id: "e1".into(),
            user_id: user.into(),
            title: title.into(),
            start_ms: start,
            end_ms: start + 100,
            timezone: "Europe/Paris".into(),
        };
        assert!(
            store
                .put_calendar_event(&event("alice", "dentist", 1000), 1)
                .await
                .unwrap(),
            "{backend}"
        );
        // Bob cannot overwrite alice's event by reusing its id.
        assert!(
            !store
                .put_calendar_event(&event("bob", "mine", 1000), 2)
                .await
                .unwrap(),
            "{backend}"
        );
        assert!(
            store.calendar_event("bob", "e1").await.unwrap().is_none(),
            "{backend}"
        );
        assert!(
            !store.delete_calendar_event("bob", "e1").await.unwrap(),
            "{backend}"
        );
        // Alice's update is an update.
        store
            .put_calendar_event(&event("alice", "dentist (moved)", 2000), 3)
            .await
            .unwrap();
        let got = store.calendar_event("alice", "e1").await.unwrap().unwrap();
        assert_eq!(got, event("alice", "dentist (moved)", 2000), "{backend}");
        // Overlap, half-open: [2000, 2100) meets [2050, 3000) but not [2100, 3000).
        assert_eq!(
            store
                .calendar_events("alice", 2050, 3000, 10)
                .await
                .unwrap()
                .len(),
            1,
            "{backend}"
        );
        assert!(
            store
                .calendar_events("alice", 2100, 3000, 10)
                .await
                .unwrap()
                .is_empty(),
            "{backend}"
        );
        assert!(
            store
                .calendar_events("bob", 0, i64::MAX, 10)
                .await
                .unwrap()
                .is_empty(),
            "{backend}"
        );
        assert!(
            store.delete_calendar_event("alice", "e1").await.unwrap(),
            "{backend}"
        );
        assert!(
            store.calendar_event("alice", "e1").await.unwrap().is_none(),
            "{backend}"
        );
    }
}

#[tokio::test]
async fn profiles_and_attachment_records() {
    for (backend, store, _database) in backends().await {
        assert!(
            store.settings("alice").await.unwrap().is_empty(),
            "{backend}"
        );
        let settings = json!({"timezone": "Asia/Tokyo", "locale": "ja"});
        let settings = settings.as_object().unwrap();
        store.set_settings("alice", settings, 1).await.unwrap();
        assert_eq!(
            &store.settings("alice").await.unwrap(),
            settings,
            "{backend}"
        );
        assert!(store.settings("bob").await.unwrap().is_empty(), "{backend}");

        let a1 = uuid::Uuid::now_v7().to_string();
        assert!(store.attachment(&a1).await.unwrap().is_none(), "{backend}");
        assert!(
            store.attachment_bytes(&a1).await.unwrap().is_none(),
            "{backend}"
        );
        store
            .insert_attachment(&a1, "alice", "image/png", b"alice's png", 1)
            .await
            .unwrap();
        let record = store.attachment(&a1).await.unwrap().unwrap();
        assert_eq!(
            (record.user_id.as_str(), record.mime_type.as_str()),
            ("alice", "image/png"),
            "{backend}"
        );
        assert_eq!(
            store.attachment_bytes(&a1).await.unwrap().unwrap(),
            b"alice's png",
            "{backend}"
        );
        // An id is never reused, and its bytes never replaced.
        assert!(
            store
                .insert_attachment(&a1, "bob", "image/png", b"bob's", 2)
                .await
                .is_err(),
            "{backend}"
        );
        assert_eq!(
            store.attachment(&a1).await.unwrap().unwrap().user_id,
            "alice",
            "{backend}"
        );
        assert_eq!(
            store.attachment_bytes(&a1).await.unwrap().unwrap(),
            b"alice's png",
            "{backend}"
        );
    }
}

#[tokio::test]
async fn latest_thread_is_the_users_most_recently_active_one() {
    for (backend, store, _database) in backends().await {
        let (a, b) = (thread(), thread());
        assert_eq!(
            store.latest_thread("alice").await.unwrap(),
            None,
            "{backend}"
        );
        let ra = input(&a, "ra", "x");
        let rb = input(&b, "rb", "y");
        let mut first = new_run("alice", &ra, "1");
        first.now_ms = 10;
        let mut second = new_run("alice", &rb, "2");
        second.now_ms = 20;
        store.accept_run(first).await.unwrap();
        store.accept_run(second).await.unwrap();
        assert_eq!(
            store.latest_thread("alice").await.unwrap(),
            Some(b),
            "{backend}"
        );
        assert_eq!(store.latest_thread("bob").await.unwrap(), None, "{backend}");
    }
}

/// SQLite alone: the file is the database.
mod sqlite {
    use super::*;
    use agwire_service::store::{JobStore, RunStore, ThreadStore};

    /// SQLite's migrations: a database written before job threads were
    /// created with their job — a job whose thread does not exist gets it
    /// (its owner's); a job whose thread another user already took moves to
    /// a fresh thread of its own. (PostgreSQL's schema had job threads from
    /// its first migration.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn older_databases_give_every_job_a_thread_of_its_owner() {
        let dir = std::env::temp_dir().join(format!("agwire-contract-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agwire.db");
        drop(SqliteStore::open(&path).await.unwrap());
        // Back to the schema before the fix, with the two kinds of jobs it allowed.
        let connection = rusqlite::Connection::open(&path).unwrap();
        let job = |id: &str, thread: &str| {
            format!(
                "INSERT INTO automation_jobs (id, user_id, name, schedule, timezone, prompt, config, enabled, thread_id, next_run_at, created_at, updated_at) \
                 VALUES ('{id}', 'alice', 'n', '{{\"every_seconds\":3600}}', 'UTC', 'p', '{{}}', 1, '{thread}', 1, 1, 1)"
            )
        };
        for sql in [
            "PRAGMA user_version = 7".to_owned(),
            // (Undo what later migrations added.)
            "ALTER TABLE run_events DROP COLUMN n_events".to_owned(),
            "ALTER TABLE run_events RENAME COLUMN events TO event".to_owned(),
            "DROP TABLE quota_runs".to_owned(),
            "DROP TABLE token_usage".to_owned(),
            "DROP TRIGGER runs_end_webhook".to_owned(),
            "DROP TABLE webhook_outbox".to_owned(),
            "DROP TABLE webhook_settings".to_owned(),
            "ALTER TABLE runs DROP COLUMN runtime_mode".to_owned(),
            "ALTER TABLE runs DROP COLUMN options".to_owned(),
            "ALTER TABLE runs DROP COLUMN stop_requested".to_owned(),
            "DROP TABLE tool_calls".to_owned(),
            "DROP INDEX jobs_by_thread".to_owned(),
            "DROP INDEX threads_by_user_activity".to_owned(),
            "CREATE INDEX threads_by_user ON threads (user_id, last_active_at)".to_owned(),
            "ALTER TABLE threads DROP COLUMN title".to_owned(),
            "ALTER TABLE attachments DROP COLUMN in_bucket".to_owned(),
            "DROP INDEX messages_shown".to_owned(),
            "ALTER TABLE messages DROP COLUMN shown".to_owned(),
            "ALTER TABLE threads DROP COLUMN derived_title".to_owned(),
            "DROP TABLE attachment_refs".to_owned(),
            job("fresh", "thread-fresh"),
            job("taken", "thread-taken"),
            "INSERT INTO threads (id, user_id, created_at, last_active_at) VALUES ('thread-taken', 'bob', 1, 1)".to_owned(),
        ] {
            connection.execute_batch(&sql).unwrap();
        }
        drop(connection);
        let store = SqliteStore::open(&path).await.unwrap();
        let fresh = store.job("alice", "fresh").await.unwrap().unwrap();
        assert_eq!(fresh.thread_id, "thread-fresh");
        assert_eq!(
            store.thread_owner("thread-fresh").await.unwrap().as_deref(),
            Some("alice")
        );
        let taken = store.job("alice", "taken").await.unwrap().unwrap();
        assert_ne!(taken.thread_id, "thread-taken");
        assert!(
            uuid::Uuid::parse_str(&taken.thread_id).is_ok(),
            "{}",
            taken.thread_id
        );
        assert_eq!(
            store
                .thread_owner(&taken.thread_id)
                .await
                .unwrap()
                .as_deref(),
            Some("alice")
        );
        assert_eq!(
            store.thread_owner("thread-taken").await.unwrap().as_deref(),
            Some("bob")
        );
    }

    #[tokio::test]
    async fn data_survives_reopening_and_a_newer_schema_is_refused() {
        let dir = std::env::temp_dir().join(format!("agwire-contract-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agwire.db");
        let t = thread();
        let r1 = input(&t, "r1", "hi");
        {
            let store = SqliteStore::open(&path).await.unwrap();
            store.accept_run(new_run("alice", &r1, "h")).await.unwrap();
        }
        let store = SqliteStore::open(&path).await.unwrap();
        let again = store.accept_run(new_run("alice", &r1, "h")).await.unwrap();
        assert!(again.replayed);
        drop(store);
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA user_version = 999")
            .unwrap();
        let err = SqliteStore::open(&path).await.unwrap_err();
        assert!(err.to_string().contains("newer than this binary"), "{err}");
    }
}

/// Eight claimers at once (as replicas would be) over 50 threads of four
/// queued turns each: every run is claimed exactly once, a thread never has
/// two runs executing, and each thread's runs execute in acceptance order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claimers_take_each_run_once_and_one_run_per_thread() {
    use std::collections::{HashMap, HashSet};
    const THREADS: usize = 50;
    const TURNS: usize = 4;
    for (backend, store, _database) in backends().await {
        let mut order: HashMap<String, (String, usize)> = HashMap::new();
        for t in 0..THREADS {
            let thread = thread();
            for turn in 0..TURNS {
                let run_id = format!("t{t}-r{turn}");
                let input = input(&thread, &run_id, "hi");
                let accepted = store
                    .accept_run(queued_behind("alice", &input, &run_id))
                    .await
                    .unwrap();
                order.insert(accepted.task_id, (thread.clone(), turn));
            }
        }
        let order = Arc::new(order);
        // Which run each thread is executing, and every claim seen.
        let executing: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let claims: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut claimers = Vec::new();
        for _ in 0..8 {
            let (store, order) = (store.clone(), order.clone());
            let (executing, claims) = (executing.clone(), claims.clone());
            claimers.push(tokio::spawn(async move {
                let nothing: OnClaim = Arc::new(|_: &str| {});
                let mut idle = 0;
                while idle < 50 {
                    let claimed = store
                        .claim_runnable(7, 2, nothing.clone(), nothing.clone())
                        .await
                        .unwrap();
                    if claimed.is_empty() {
                        idle += 1;
                        tokio::task::yield_now().await;
                        continue;
                    }
                    idle = 0;
                    for run in claimed {
                        let (thread, _) = &order[&run.task_id];
                        let before = executing
                            .lock()
                            .unwrap()
                            .insert(thread.clone(), run.task_id.clone());
                        assert!(before.is_none(), "two runs of {thread} at once");
                        claims.lock().unwrap().push(run.task_id.clone());
                        executing.lock().unwrap().remove(thread);
                        let done = finished(thread, &run.input.run_id);
                        end(store.as_ref(), &run.task_id, &done, &[]).await.unwrap();
                    }
                }
            }));
        }
        for claimer in claimers {
            claimer.await.unwrap();
        }
        let claims = claims.lock().unwrap().clone();
        let unique: HashSet<&String> = claims.iter().collect();
        assert_eq!(claims.len(), THREADS * TURNS, "{backend}: claims");
        assert_eq!(
            unique.len(),
            THREADS * TURNS,
            "{backend}: a run claimed twice"
        );
        // Per thread, the claims came in acceptance order.
        let mut next: HashMap<&String, usize> = HashMap::new();
        for task in &claims {
            let (thread, turn) = &order[task];
            let expected = next.entry(thread).or_insert(0);
            assert_eq!(turn, expected, "{backend}: {thread} out of order");
            *expected += 1;
        }
    }
}

/// Sixteen schedulers advancing one due tick at once: exactly one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_schedulers_advance_a_tick_once() {
    for (backend, store, _database) in backends().await {
        store
            .create_job(&job("daily", "alice", &thread(), Some(10)))
            .await
            .unwrap();
        let mut racers = Vec::new();
        for _ in 0..16 {
            let store = store.clone();
            racers.push(tokio::spawn(async move {
                store.advance_job("daily", 10, Some(20)).await.unwrap()
            }));
        }
        let mut won = 0;
        for racer in racers {
            won += usize::from(racer.await.unwrap());
        }
        assert_eq!(won, 1, "{backend}");
    }
}

/// Appends racing on one run's log: numbers stay gap-free and unique.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_appends_number_a_log_without_gaps() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let input = input(&t, "r", "hi");
        let accepted = store
            .accept_run(new_run("alice", &input, "h"))
            .await
            .unwrap();
        assert_eq!(claim_all(store.as_ref()).await.len(), 1, "{backend}");
        let mut writers = Vec::new();
        for w in 0..8 {
            let (store, task) = (store.clone(), accepted.task_id.clone());
            writers.push(tokio::spawn(async move {
                for i in 0..10 {
                    store
                        .append_events(&task, &[text(w * 100 + i), text(w * 100 + i)])
                        .await
                        .unwrap();
                }
            }));
        }
        for writer in writers {
            writer.await.unwrap();
        }
        let seqs: Vec<u64> = store
            .events_after(&accepted.task_id, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|(seq, _)| seq)
            .collect();
        assert_eq!(seqs, (1..=160).collect::<Vec<u64>>(), "{backend}");
    }
}

/// A run that is not running takes no events (it ended — perhaps ended by a
/// survivor while its replica was cut off).
/// Writes of many runs in flight at once (PostgreSQL commits them in
/// batches): each gets its own answer, and each log its own numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_of_many_runs_at_once_each_get_their_own_answer() {
    for (backend, store, _database) in backends().await {
        let mut runs = Vec::new();
        for i in 0..31 {
            let t = thread();
            let input = input(&t, &format!("r{i}"), "hi");
            let accepted = store
                .accept_run(new_run("alice", &input, "h"))
                .await
                .unwrap();
            runs.push((t, format!("r{i}"), accepted.task_id));
        }
        assert_eq!(claim_all(store.as_ref()).await.len(), 31, "{backend}");
        // r30 has ended before the others' writes start.
        let (t30, r30, gone) = runs.pop().unwrap();
        assert_eq!(
            end(&*store, &gone, &finished(&t30, &r30), &[]).await,
            Some(2)
        );
        let mut writes = tokio::task::JoinSet::new();
        for (i, (t, run_id, task)) in runs.iter().cloned().enumerate() {
            let store = store.clone();
            writes.spawn(async move {
                if i < 20 {
                    let first = store
                        .append_events(&task, &[run_started(&t, &run_id), text(i)])
                        .await
                        .unwrap();
                    (i, Some(first))
                } else {
                    (i, end(&*store, &task, &finished(&t, &run_id), &[]).await)
                }
            });
        }
        for late in 0..2 {
            let (store, gone, t30, r30) = (store.clone(), gone.clone(), t30.clone(), r30.clone());
            writes.spawn(async move {
                if late == 0 {
                    let refused = store.append_events(&gone, &[text(99)]).await;
                    assert!(
                        matches!(refused, Err(Error::RunNotRunning { .. })),
                        "{refused:?}"
                    );
                    (100, None)
                } else {
                    (101, end(&*store, &gone, &finished(&t30, &r30), &[]).await)
                }
            });
        }
        while let Some(answer) = writes.join_next().await {
            let (i, number) = answer.unwrap();
            match i {
                // A first append; an end of an empty log (RUN_STARTED, then
                // the terminal event); an end of an ended run.
                0..20 => assert_eq!(number, Some(1), "{backend} {i}"),
                20..30 => assert_eq!(number, Some(2), "{backend} {i}"),
                _ => assert_eq!(number, None, "{backend} {i}"),
            }
        }
        for (i, (_, _, task)) in runs.iter().enumerate() {
            let log = store.events_after(task, 0).await.unwrap();
            let seqs: Vec<u64> = log.iter().map(|(seq, _)| *seq).collect();
            assert_eq!(seqs, [1, 2], "{backend} {i}");
        }
        assert_eq!(
            store.events_after(&gone, 0).await.unwrap().len(),
            2,
            "{backend}"
        );
    }
}

#[tokio::test]
async fn only_a_running_run_takes_events() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let input = input(&t, "r", "hi");
        let accepted = store
            .accept_run(new_run("alice", &input, "h"))
            .await
            .unwrap();
        // Queued: not yet.
        assert!(
            matches!(
                store.append_events(&accepted.task_id, &[text(1)]).await,
                Err(Error::RunNotRunning { .. })
            ),
            "{backend}"
        );
        claim_all(store.as_ref()).await;
        assert_eq!(
            store
                .append_events(&accepted.task_id, &[text(1)])
                .await
                .unwrap(),
            1,
            "{backend}"
        );
        end(store.as_ref(), &accepted.task_id, &finished(&t, "r"), &[]).await;
        // Ended: never again.
        assert!(
            matches!(
                store.append_events(&accepted.task_id, &[text(2)]).await,
                Err(Error::RunNotRunning { .. })
            ),
            "{backend}"
        );
        assert_eq!(
            whole_log(&*store, &accepted.task_id).await.len(),
            2,
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_runs_last_events_are_written_with_its_end_and_only_a_running_runs() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let r1 = input(&t, "r1", "hi");
        let accepted = store.accept_run(new_run("alice", &r1, "h")).await.unwrap();
        claim_all(&*store).await;
        store
            .append_events(&accepted.task_id, &[run_started(&t, "r1")])
            .await
            .unwrap();
        let last = [text(1), text(2)];
        let terminal = finished(&t, "r1");
        let ending = Ending {
            status: RunStatus::Succeeded,
            error: None,
            usage: None,
            events: &last,
            terminal: &terminal,
            output: &[],
            ui_schema: None,
            calls_expire_at: None,
            tokens: 0,
        };
        assert_eq!(
            store.end_run(&accepted.task_id, &ending, 3).await.unwrap(),
            Some(4),
            "{backend}: numbered after the log, the terminal event last"
        );
        let log = whole_log(&*store, &accepted.task_id).await;
        assert_eq!(
            log,
            [run_started(&t, "r1"), text(1), text(2), terminal.clone()],
            "{backend}"
        );
        // Ended: neither the events nor the end again.
        assert_eq!(
            store.end_run(&accepted.task_id, &ending, 4).await.unwrap(),
            None,
            "{backend}"
        );
        // Queued (not claimed): a run that never ran takes no events, so no
        // end that brings some.
        let t2 = thread();
        let r2 = input(&t2, "r2", "hi");
        let queued = store.accept_run(new_run("alice", &r2, "h2")).await.unwrap();
        let starts = [run_started(&t2, "r2")];
        let terminal = finished(&t2, "r2");
        let ending = Ending {
            events: &starts,
            terminal: &terminal,
            ..ending
        };
        assert_eq!(
            store.end_run(&queued.task_id, &ending, 5).await.unwrap(),
            None,
            "{backend}"
        );
        assert_eq!(
            store.run_status(&queued.task_id).await.unwrap(),
            Some(RunStatus::Queued),
            "{backend}"
        );
        assert!(
            whole_log(&*store, &queued.task_id).await.is_empty(),
            "{backend}"
        );
        assert_eq!(
            whole_log(&*store, &accepted.task_id).await.len(),
            4,
            "{backend}"
        );
    }
}

/// PostgreSQL: a replica's running runs carry its lease while it renews
/// it; once it stops (it died), they are abandoned — and only they.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_stops_renewing_its_leases_leaves_its_runs_abandoned() {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let lease = std::time::Duration::from_millis(800);
    let survivor = PgStore::connect_with_lease(&database.url, lease)
        .await
        .unwrap();
    let doomed = PgStore::connect_with_lease(&database.url, lease)
        .await
        .unwrap();
    let (a, b) = (thread(), thread());
    let (ra, rb) = (input(&a, "ra", "x"), input(&b, "rb", "y"));
    let on_doomed = survivor
        .accept_run(new_run("alice", &ra, "1"))
        .await
        .unwrap();
    assert_eq!(claim_all(&doomed).await.len(), 1);
    let on_survivor = survivor
        .accept_run(new_run("alice", &rb, "2"))
        .await
        .unwrap();
    assert_eq!(claim_all(&survivor).await.len(), 1);
    // Both replicas renew: nothing is abandoned, however long it runs.
    tokio::time::sleep(lease * 2).await;
    assert!(survivor.abandoned_runs().await.unwrap().is_empty());
    drop(doomed);
    // Until the doomed replica's lease runs out, as the survivor's sweep
    // sees it (polled, bounded: the lease is 800 ms, the bound 30 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let abandoned: Vec<String> = loop {
        let abandoned: Vec<String> = survivor
            .abandoned_runs()
            .await
            .unwrap()
            .into_iter()
            .map(|run| run.task_id)
            .collect();
        if !abandoned.is_empty() {
            break abandoned;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the stopped replica's lease never ran out: nothing abandoned after 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(abandoned, [on_doomed.task_id]);
    assert_ne!(abandoned[0], on_survivor.task_id);
}

/// PostgreSQL: what one replica commits reaches the others as changes —
/// runnable runs (an accept that did not start its run), appended events
/// with their numbers, cancel requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_hear_each_others_commits() {
    use agwire_service::store::Change;
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let writer = PgStore::connect(&database.url).await.unwrap();
    let reader = PgStore::connect(&database.url).await.unwrap();
    let mut changes = reader.changes().unwrap();
    let t = thread();
    let input = input(&t, "r", "hi");
    let accepted = writer
        .accept_run(new_run("alice", &input, "h"))
        .await
        .unwrap();
    claim_all(&writer).await;
    writer
        .append_events(&accepted.task_id, &[text(1), text(2)])
        .await
        .unwrap();
    writer.request_cancel(&accepted.task_id).await.unwrap();
    let mut heard = Vec::new();
    while heard.len() < 3 {
        let change = tokio::time::timeout(std::time::Duration::from_secs(5), changes.recv())
            .await
            .expect("a change within 5 s")
            .unwrap();
        heard.push(change);
    }
    // The accept's run is announced after its commit, apart (so it may
    // arrive after the later commits' notifications); those two arrive in
    // commit order.
    assert!(heard.contains(&Change::Runnable), "{heard:?}");
    heard.retain(|change| *change != Change::Runnable);
    assert_eq!(
        heard,
        [
            Change::Appended {
                task_id: accepted.task_id.clone(),
                first: 1,
                last: 2
            },
            Change::CancelRequested {
                task_id: accepted.task_id.clone()
            },
        ]
    );
}

/// PostgreSQL: every replica signs attachment URLs with one key, made by
/// whichever asked first.
#[tokio::test]
async fn replicas_share_one_url_signing_key() {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let first = PgStore::connect(&database.url).await.unwrap();
    let second = PgStore::connect(&database.url).await.unwrap();
    let key = first.url_signing_key().await.unwrap().unwrap();
    assert!(key.len() >= 32);
    assert_eq!(second.url_signing_key().await.unwrap().unwrap(), key);
    assert_eq!(first.url_signing_key().await.unwrap().unwrap(), key);
}

/// PostgreSQL: a batch of writes that PostgreSQL undoes (here a real
/// deadlock with another transaction, which PostgreSQL resolves by undoing
/// the batch) goes again call by call: every write lands once.
#[tokio::test(flavor = "current_thread")]
async fn a_batch_postgresql_undid_goes_again_call_by_call() {
    use sqlx::{Connection, Executor};
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let store = Arc::new(PgStore::connect(&database.url).await.unwrap());
    let mut tasks = Vec::new();
    for run_id in ["first", "second"] {
        let t = thread();
        let input = input(&t, run_id, "hi");
        let accepted = store
            .accept_run(new_run("alice", &input, "h"))
            .await
            .unwrap();
        tasks.push((t, run_id, accepted.task_id));
    }
    assert_eq!(claim_all(store.as_ref()).await.len(), 2);
    // A batch locks its runs in task order: the first, then the second.
    tasks.sort_by(|a, b| a.2.cmp(&b.2));
    let (low, high) = (tasks[0].2.clone(), tasks[1].2.clone());
    let mut other = sqlx::PgConnection::connect(&database.url).await.unwrap();
    // The batch must be the one PostgreSQL undoes: it waits first, and this
    // session looks for deadlocks only long after its own check (default
    // 1 s) has run, however loaded the machine.
    other.execute("SET deadlock_timeout = '30s'").await.unwrap();
    other.execute("BEGIN").await.unwrap();
    let lock = "SELECT 1 FROM runs WHERE task_id = $1 FOR UPDATE";
    sqlx::query(lock)
        .bind(&high)
        .execute(&mut other)
        .await
        .unwrap();
    // Both appends are sent before the writer runs (one thread): one batch,
    // which takes the low run and waits for the high one.
    let appends = tokio::spawn({
        let (store, tasks) = (store.clone(), tasks.clone());
        async move {
            let starts = [
                [run_started(&tasks[0].0, tasks[0].1)],
                [run_started(&tasks[1].0, tasks[1].1)],
            ];
            // The high run ends, its last event with its end: the call that
            // goes again alone is both, in one transaction.
            let terminal = finished(&tasks[1].0, tasks[1].1);
            let ending = Ending {
                status: RunStatus::Succeeded,
                error: None,
                usage: None,
                events: &starts[1],
                terminal: &terminal,
                output: &[],
                ui_schema: None,
                calls_expire_at: None,
                tokens: 0,
            };
            let (a, b) = tokio::join!(
                store.append_events(&tasks[0].2, &starts[0]),
                store.end_run(&tasks[1].2, &ending, 3),
            );
            (a.unwrap(), b.unwrap())
        }
    });
    // Until the batch waits for the high run's lock (seen in
    // pg_stat_activity, not guessed with a sleep).
    let waiting = "SELECT COUNT(*) FROM pg_stat_activity \
                   WHERE datname = current_database() AND wait_event_type = 'Lock'";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut watcher = sqlx::PgConnection::connect(&database.url).await.unwrap();
    while sqlx::query_scalar::<_, i64>(waiting)
        .fetch_one(&mut watcher)
        .await
        .unwrap()
        == 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the batch never waited for the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Now the other transaction waits for the low run: a circle, which
    // PostgreSQL breaks by undoing the batch (it waited first).
    sqlx::query(lock)
        .bind(&low)
        .execute(&mut other)
        .await
        .unwrap();
    other.execute("ROLLBACK").await.unwrap();
    assert_eq!(appends.await.unwrap(), (1, Some(2)));
    for ((_, _, task), logged) in tasks.iter().zip([1, 2]) {
        assert_eq!(store.events_after(task, 0).await.unwrap().len(), logged);
    }
    // The statistics reach pg_stat_database when the backend that saw the
    // deadlock reports them (within a second or so): polled, bounded. Each
    // query outside a transaction reads a fresh snapshot of them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen;
    loop {
        seen = sqlx::query_scalar::<_, i64>(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        if seen > 0 || std::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(seen, 1, "the batch was undone by a deadlock");
}

// Threads as their owner manages them (issue 27): the list, titles, the
// frontend tool calls a thread waits on, deletion.

/// An agent-run turn: its user message, then tool messages answering
/// `answers` (tool call ids).
fn answering(thread: &str, run_id: &str, answers: &[&str]) -> RunAgentInput {
    let mut messages =
        vec![json!({"id": format!("{run_id}-u"), "role": "user", "content": run_id})];
    for id in answers {
        messages.push(json!({"id": format!("{run_id}-{id}"), "role": "tool", "toolCallId": id, "content": "approved"}));
    }
    let body = json!({
        "threadId": thread, "runId": run_id, "messages": messages,
        "forwardedProps": {"runtime_mode": "chat"}
    });
    validate_run(body.to_string().as_bytes(), &Rules::default())
        .unwrap()
        .input
}

/// Accepts a run at `now_ms`, claims and ends it, leaving `asks` (tool
/// call ids of a `confirm_action`) pending.
async fn turn(
    store: &dyn Store,
    user: &str,
    input: &RunAgentInput,
    now_ms: i64,
    asks: &[&str],
) -> Result<(), Error> {
    turn_until(store, user, input, now_ms, asks, None).await
}

/// [`turn`], its calls expiring at `expire_at`.
async fn turn_until(
    store: &dyn Store,
    user: &str,
    input: &RunAgentInput,
    now_ms: i64,
    asks: &[&str],
    expire_at: Option<i64>,
) -> Result<(), Error> {
    let run = NewRun {
        now_ms,
        ..new_run(user, input, &input.run_id)
    };
    let accepted = store.accept_run(run).await?;
    claim_all(store).await;
    let calls: Vec<serde_json::Value> = asks
        .iter()
        .map(|id| json!({"id": id, "type": "function", "function": {"name": "confirm_action", "arguments": "{\"action\":\"book\"}"}}))
        .collect();
    let output: Vec<Message> = if asks.is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_value(json!({"id": format!("{}-a", input.run_id), "role": "assistant", "toolCalls": calls})).unwrap()]
    };
    let terminal = Event::RunFinished({
        let mut event = RunFinishedEvent::new(input.thread_id.clone(), input.run_id.clone());
        event.outcome = (!asks.is_empty()).then(|| agwire_core::RunFinishedOutcome::Success {
            pending_tool_call_ids: Some(asks.iter().map(|s| (*s).to_owned()).collect()),
        });
        event
    });
    let ending = Ending {
        status: RunStatus::Succeeded,
        error: None,
        usage: None,
        events: &[],
        terminal: &terminal,
        output: &output,
        ui_schema: None,
        calls_expire_at: expire_at,
        tokens: 0,
    };
    store.end_run(&accepted.task_id, &ending, 3).await?;
    Ok(())
}

#[tokio::test]
async fn a_users_threads_are_listed_newest_first_in_pages_with_their_titles() {
    for (backend, store, _database) in backends().await {
        let (t1, t2, t3, theirs) = (thread(), thread(), thread(), thread());
        turn(
            &*store,
            "alice",
            &input(&t1, "l1", "first\nsecond line"),
            10,
            &[],
        )
        .await
        .unwrap();
        turn(&*store, "alice", &input(&t2, "l2", "two"), 20, &[])
            .await
            .unwrap();
        turn(&*store, "alice", &input(&t3, "l3", "three"), 30, &[])
            .await
            .unwrap();
        turn(&*store, "bob", &input(&theirs, "l4", "bob's"), 40, &[])
            .await
            .unwrap();
        // t1 active again, last.
        turn(&*store, "alice", &input(&t1, "l5", "again"), 50, &[])
            .await
            .unwrap();

        let page = store.threads("alice", None, 2).await.unwrap();
        let ids: Vec<&str> = page.iter().map(|t| t.thread_id.as_str()).collect();
        assert_eq!(ids, [t1.as_str(), t3.as_str()], "{backend}");
        assert_eq!(
            agwire_service::threads::title(&page[0]),
            "first",
            "{backend}"
        );
        assert_eq!(page[0].last_active_at, 50, "{backend}");
        assert_eq!(page[0].created_at, 10, "{backend}");
        let last = &page[1];
        let rest = store
            .threads("alice", Some((last.last_active_at, &last.thread_id)), 2)
            .await
            .unwrap();
        let ids: Vec<&str> = rest.iter().map(|t| t.thread_id.as_str()).collect();
        assert_eq!(ids, [t2.as_str()], "{backend}");
        assert_eq!(
            store.threads("bob", None, 10).await.unwrap().len(),
            1,
            "{backend}"
        );

        // Titles: the owner's, back to the derived one; never another user's.
        assert!(
            store
                .set_thread_title("alice", &t2, Some("Trip"))
                .await
                .unwrap(),
            "{backend}"
        );
        assert!(
            !store
                .set_thread_title("bob", &t2, Some("Mine"))
                .await
                .unwrap(),
            "{backend}"
        );
        let t = store.thread("alice", &t2).await.unwrap().unwrap();
        assert_eq!(
            (agwire_service::threads::title(&t), t.title.is_some()),
            ("Trip".into(), true),
            "{backend}"
        );
        store.set_thread_title("alice", &t2, None).await.unwrap();
        let t = store.thread("alice", &t2).await.unwrap().unwrap();
        assert_eq!(agwire_service::threads::title(&t), "two", "{backend}");
        assert!(
            store.thread("bob", &t2).await.unwrap().is_none(),
            "{backend}"
        );

        // A waiting run is the thread's active one; a job's thread names it.
        let busy = input(&t3, "l6", "busy");
        store
            .accept_run(new_run("alice", &busy, "l6"))
            .await
            .unwrap();
        let t = store.thread("alice", &t3).await.unwrap().unwrap();
        assert_eq!(t.active_run_id.as_deref(), Some("l6"), "{backend}");
        let job_thread = thread();
        store
            .create_job(&job("job-27", "alice", &job_thread, None))
            .await
            .unwrap();
        let t = store.thread("alice", &job_thread).await.unwrap().unwrap();
        assert_eq!(t.job_id.as_deref(), Some("job-27"), "{backend}");
        assert_eq!(agwire_service::threads::title(&t), "", "{backend}");
    }
}

#[tokio::test]
async fn a_pending_tool_call_is_answered_once_and_a_turn_past_it_closes_it() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        turn(&*store, "alice", &input(&t, "p1", "book it"), 10, &["c1"])
            .await
            .unwrap();
        let pending = store.pending_tool_calls(&t, 0).await.unwrap();
        assert_eq!(pending.len(), 1, "{backend}");
        assert_eq!(
            (
                pending[0].tool_call_id.as_str(),
                pending[0].name.as_str(),
                pending[0].run_id.as_str(),
                pending[0].asked_at
            ),
            ("c1", "confirm_action", "p1", 3),
            "{backend}"
        );
        assert_eq!(pending[0].arguments, r#"{"action":"book"}"#, "{backend}");
        let before = texts(&*store, &t).await;

        // An answer to a call the thread never asked: refused, nothing kept.
        let unknown = turn(&*store, "alice", &answering(&t, "p2", &["c9"]), 20, &[]).await;
        assert!(
            matches!(unknown, Err(Error::ToolCallNotPending { ref tool_call_id }) if tool_call_id == "c9"),
            "{backend}: {unknown:?}"
        );
        assert_eq!(texts(&*store, &t).await, before, "{backend}");
        assert!(
            store.run("alice", "p2").await.unwrap().is_none(),
            "{backend}"
        );
        assert_eq!(
            store.pending_tool_calls(&t, 0).await.unwrap().len(),
            1,
            "{backend}"
        );

        // The answer: accepted once; the call is no longer pending.
        turn(&*store, "alice", &answering(&t, "p3", &["c1"]), 30, &["c2"])
            .await
            .unwrap();
        let pending = store.pending_tool_calls(&t, 0).await.unwrap();
        let ids: Vec<&str> = pending.iter().map(|c| c.tool_call_id.as_str()).collect();
        assert_eq!(ids, ["c2"], "{backend}");
        // A second answer (another tab): refused clearly.
        let again = turn(&*store, "alice", &answering(&t, "p4", &["c1"]), 40, &[]).await;
        assert!(
            matches!(again, Err(Error::ToolCallAnswered { ref tool_call_id }) if tool_call_id == "c1"),
            "{backend}: {again:?}"
        );
        assert!(
            store.run("alice", "p4").await.unwrap().is_none(),
            "{backend}"
        );

        // A turn that goes on without answering c2 closes it.
        turn(&*store, "alice", &input(&t, "p5", "never mind"), 50, &[])
            .await
            .unwrap();
        assert!(
            store.pending_tool_calls(&t, 0).await.unwrap().is_empty(),
            "{backend}"
        );
        let late = turn(&*store, "alice", &answering(&t, "p6", &["c2"]), 60, &[]).await;
        assert!(
            matches!(late, Err(Error::ToolCallClosed { ref tool_call_id }) if tool_call_id == "c2"),
            "{backend}: {late:?}"
        );

        // A run that fails leaves nothing pending.
        let failed = input(&t, "p7", "fail");
        let accepted = store
            .accept_run(new_run("alice", &failed, "p7"))
            .await
            .unwrap();
        claim_all(&*store).await;
        let call: Message = serde_json::from_value(json!({"id": "p7-a", "role": "assistant", "toolCalls": [{"id": "c3", "type": "function", "function": {"name": "confirm_action", "arguments": "{}"}}]})).unwrap();
        let error = Event::RunError(RunErrorEvent::new("model down"));
        end(&*store, &accepted.task_id, &error, &[call]).await;
        assert!(
            store.pending_tool_calls(&t, 0).await.unwrap().is_empty(),
            "{backend}"
        );
    }
}

#[tokio::test]
async fn deleting_a_thread_removes_everything_of_it_and_nothing_else() {
    for (backend, store, _database) in backends().await {
        let (gone, kept, bobs) = (thread(), thread(), thread());
        let (own, shared, bob_png) = (
            uuid::Uuid::new_v4().to_string(),
            uuid::Uuid::new_v4().to_string(),
            uuid::Uuid::new_v4().to_string(),
        );
        for (id, user) in [(&own, "alice"), (&shared, "alice"), (&bob_png, "bob")] {
            store
                .insert_attachment(id, user, "image/png", b"png", 1)
                .await
                .unwrap();
        }
        let with_images = |thread: &str, run_id: &str, ids: &[&String]| {
            let mut parts = vec![json!({"type": "text", "text": "look"})];
            for id in ids {
                parts.push(json!({"type": "binary", "mimeType": "image/png", "url": format!("attachment:{id}")}));
            }
            let body = json!({
                "threadId": thread, "runId": run_id,
                "messages": [{"id": format!("{run_id}-u"), "role": "user", "content": parts}],
                "forwardedProps": {"runtime_mode": "chat"}
            });
            validate_run(body.to_string().as_bytes(), &Rules::default())
                .unwrap()
                .input
        };
        turn(
            &*store,
            "alice",
            &with_images(&gone, "d1", &[&own, &shared]),
            10,
            &["c1"],
        )
        .await
        .unwrap();
        let second = input(&gone, "d2", "more");
        let second_task = {
            turn(&*store, "alice", &answering(&gone, "d2", &["c1"]), 20, &[])
                .await
                .unwrap();
            store
                .run("alice", &second.run_id)
                .await
                .unwrap()
                .unwrap()
                .task_id
        };
        turn(
            &*store,
            "alice",
            &with_images(&kept, "d3", &[&shared]),
            30,
            &[],
        )
        .await
        .unwrap();
        turn(
            &*store,
            "bob",
            &with_images(&bobs, "d4", &[&bob_png]),
            40,
            &[],
        )
        .await
        .unwrap();

        // Not bob's to delete; and a thread with an active run waits.
        assert!(
            matches!(
                store.delete_thread("bob", &gone).await,
                Err(Error::ThreadNotFound)
            ),
            "{backend}"
        );
        let busy = input(&gone, "d5", "busy");
        let queued = store
            .accept_run(new_run("alice", &busy, "d5"))
            .await
            .unwrap();
        assert!(
            matches!(
                store.delete_thread("alice", &gone).await,
                Err(Error::ThreadBusy)
            ),
            "{backend}"
        );
        store
            .cancel_queued(
                &queued.task_id,
                &[run_started(&gone, "d5"), finished(&gone, "d5")],
                50,
            )
            .await
            .unwrap();
        // An automation job's thread goes with its job.
        let job_thread = thread();
        store
            .create_job(&job("job-d", "alice", &job_thread, None))
            .await
            .unwrap();
        assert!(
            matches!(store.delete_thread("alice", &job_thread).await, Err(Error::ThreadOfJob { ref job_id }) if job_id == "job-d"),
            "{backend}"
        );

        let deleted = store.delete_thread("alice", &gone).await.unwrap();
        // d1: user, assistant; d2: its answer, user; d5 (the thread was
        // idle: its message joined at once, though it never ran): user.
        assert_eq!(
            (deleted.runs, deleted.messages),
            (3, 5),
            "{backend}: {deleted:?}"
        );
        assert_eq!(deleted.attachments, std::slice::from_ref(&own), "{backend}");
        assert!(
            store.thread("alice", &gone).await.unwrap().is_none(),
            "{backend}"
        );
        assert!(
            store.thread_owner(&gone).await.unwrap().is_none(),
            "{backend}"
        );
        assert!(
            store
                .thread_messages(&gone, &["user", "assistant", "tool"])
                .await
                .unwrap()
                .is_empty(),
            "{backend}"
        );
        assert!(
            store.pending_tool_calls(&gone, 0).await.unwrap().is_empty(),
            "{backend}"
        );
        for run_id in ["d1", "d2", "d5"] {
            assert!(
                store.run("alice", run_id).await.unwrap().is_none(),
                "{backend}: {run_id}"
            );
        }
        assert!(
            store
                .events_after(&second_task, 0)
                .await
                .unwrap()
                .is_empty(),
            "{backend}"
        );
        assert!(store.attachment(&own).await.unwrap().is_none(), "{backend}");
        assert!(
            store.attachment_bytes(&own).await.unwrap().is_none(),
            "{backend}"
        );
        // What another thread (or user) still refers to stays.
        assert!(
            store.attachment(&shared).await.unwrap().is_some(),
            "{backend}"
        );
        assert_eq!(
            store.attachment_bytes(&shared).await.unwrap().as_deref(),
            Some(&b"png"[..]),
            "{backend}"
        );
        assert!(
            store.attachment(&bob_png).await.unwrap().is_some(),
            "{backend}"
        );
        assert_eq!(texts(&*store, &kept).await, ["look"], "{backend}");
        assert_eq!(texts(&*store, &bobs).await, ["look"], "{backend}");
        assert!(store.run("bob", "d4").await.unwrap().is_some(), "{backend}");
        // Gone is gone: a second delete finds nothing; the id can start anew.
        assert!(
            matches!(
                store.delete_thread("alice", &gone).await,
                Err(Error::ThreadNotFound)
            ),
            "{backend}"
        );
        turn(
            &*store,
            "alice",
            &input(&gone, "d6", "fresh start"),
            60,
            &[],
        )
        .await
        .unwrap();
        assert_eq!(texts(&*store, &gone).await, ["fresh start"], "{backend}");
    }
}

#[tokio::test]
async fn accepts_arriving_together_are_each_answered_as_if_alone() {
    // Backends may commit accepts that arrive together in one transaction
    // (PostgreSQL's `agwire_accept_many`, SQLite's writer): every request
    // still gets the answer it would get alone, and only what was accepted
    // is stored.
    for (backend, store, _database) in backends().await {
        let shared = thread();
        let alices = thread();
        let taken = input(&alices, "taken", "before");
        store
            .accept_run(new_run("alice", &taken, "taken"))
            .await
            .unwrap();
        let fresh: Vec<String> = (0..40).map(|_| thread()).collect();
        let mut tasks = Vec::new();
        let mut spawn = |user: &'static str, thread: String, run: String, hash: String| {
            let store = store.clone();
            tasks.push((
                run.clone(),
                user,
                tokio::spawn(async move {
                    let input = input(&thread, &run, "together");
                    store.accept_run(new_run(user, &input, &hash)).await
                }),
            ));
        };
        for (i, t) in fresh.iter().enumerate() {
            spawn("alice", t.clone(), format!("fresh{i}"), format!("h{i}"));
        }
        for i in 0..10 {
            spawn(
                "alice",
                shared.clone(),
                format!("shared{i}"),
                format!("s{i}"),
            );
        }
        let again_thread = thread();
        for _ in 0..5 {
            // The same request five times: one run, four replays.
            spawn("alice", again_thread.clone(), "again".into(), "same".into());
        }
        for i in 0..3 {
            spawn("bob", alices.clone(), format!("bob{i}"), format!("b{i}"));
        }
        spawn("alice", alices.clone(), "taken".into(), "other".into());
        let (mut fresh_ok, mut shared_ok, mut busy, mut again, mut replays) = (0, 0, 0, 0, 0);
        for (run, user, task) in tasks {
            match (task.await.unwrap(), user) {
                (Ok(a), _) if run.starts_with("fresh") => {
                    assert!(a.created && !a.replayed && !a.waiting, "{backend}: {run}");
                    fresh_ok += 1;
                }
                (Ok(_), _) if run.starts_with("shared") => shared_ok += 1,
                (Err(Error::ThreadBusy), _) if run.starts_with("shared") => busy += 1,
                (Ok(a), _) if run == "again" => {
                    if a.replayed {
                        replays += 1;
                    } else {
                        again += 1;
                    }
                }
                (Err(Error::ThreadNotFound), "bob") => {}
                (Err(Error::RunIdReused { .. }), _) if run == "taken" => {}
                (other, _) => panic!("{backend}: {run} answered {other:?}"),
            }
        }
        assert_eq!(fresh_ok, 40, "{backend}");
        assert_eq!(
            (shared_ok, busy),
            (1, 9),
            "{backend}: one run per idle thread"
        );
        assert_eq!((again, replays), (1, 4), "{backend}: one request, one run");
        // Stored: exactly the accepted runs (the first, one per fresh
        // thread, the shared thread's and `again`).
        let claimed = claim_all(&*store).await;
        assert_eq!(claimed.len(), 1 + 40 + 1 + 1, "{backend}");
        assert!(
            texts(&*store, &alices).await.iter().all(|t| t == "before"),
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_claims_briefing_is_what_reading_it_afterwards_gives() {
    use agwire_service::store::Briefing;
    for (backend, store, _database) in backends().await {
        let settings = json!({"timezone": "Asia/Tokyo", "locale": "zh-CN"});
        store
            .set_settings("alice", settings.as_object().unwrap(), 1)
            .await
            .unwrap();
        let t = thread();
        let first = input(&t, "c1", "first");
        store
            .accept_run(new_run("alice", &first, "1"))
            .await
            .unwrap();
        let claimed = claim_all(&*store).await;
        finish(&*store, &claimed[0].task_id, &t, "c1").await;
        let second = input(&t, "c2", "second");
        store
            .accept_run(new_run("alice", &second, "2"))
            .await
            .unwrap();
        let claimed = claim_all(&*store).await;
        assert_eq!(claimed.len(), 1, "{backend}");
        let read = Briefing::read(&*store, "alice", &t, false).await.unwrap();
        assert_eq!(read.history.len(), 3, "{backend}: user, assistant, user");
        // Oldest first, and the owner's settings as set (PostgreSQL reads
        // both in one statement, SQLite apart: the same briefing).
        let said = roles_and_texts(&read.history);
        assert_eq!(
            said[0],
            ("user".to_owned(), "first".to_owned()),
            "{backend}"
        );
        assert_eq!(said[1].0, "assistant", "{backend}");
        assert_eq!(
            said[2],
            ("user".to_owned(), "second".to_owned()),
            "{backend}"
        );
        let read_settings: serde_json::Value =
            serde_json::from_str(read.settings.as_deref().unwrap()).unwrap();
        assert_eq!(read_settings, settings, "{backend}");
        if let Some(briefing) = &claimed[0].briefing {
            assert_eq!(briefing, &read, "{backend}");
        }
        // A thread longer than the window gives its latest messages only.
        let long = thread();
        for i in 0..agwire_service::store::HISTORY_WINDOW + 5 {
            let turn = input(&long, &format!("l{i}"), &format!("turn {i}"));
            store
                .accept_run(new_run("alice", &turn, &format!("l{i}")))
                .await
                .unwrap();
            let claimed = claim_all(&*store).await;
            if let Some(briefing) = &claimed[0].briefing {
                let read = Briefing::read(&*store, "alice", &long, false)
                    .await
                    .unwrap();
                assert_eq!(briefing, &read, "{backend}");
            }
            finish(&*store, &claimed[0].task_id, &long, &format!("l{i}")).await;
        }
        let read = Briefing::read(&*store, "alice", &long, false)
            .await
            .unwrap();
        assert_eq!(
            read.history.len(),
            agwire_service::store::HISTORY_WINDOW as usize,
            "{backend}"
        );
        let newest = format!("l{}-answer", agwire_service::store::HISTORY_WINDOW + 4);
        assert!(
            read.history.last().unwrap().contains(&newest),
            "{backend}: the newest last"
        );
    }
}

/// Ends a run as succeeded with one assistant message.
/// A briefing's history as (role, text) pairs, in its order.
fn roles_and_texts(history: &[String]) -> Vec<(String, String)> {
    history
        .iter()
        .map(|body| {
            let m: serde_json::Value = serde_json::from_str(body).unwrap();
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn finish(store: &dyn Store, task_id: &str, thread: &str, run_id: &str) {
    let said: Message = serde_json::from_value(
        json!({"id": format!("{run_id}-answer"), "role": "assistant", "content": "answer"}),
    )
    .unwrap();
    end(store, task_id, &finished(thread, run_id), &[said])
        .await
        .unwrap();
}

/// An input no validation judged (the store must survive what the API
/// refuses: the API is not its only caller).
fn unvalidated(thread: &str, run_id: &str, text: &str) -> RunAgentInput {
    serde_json::from_value(json!({
        "threadId": thread, "runId": run_id, "state": {}, "tools": [], "context": [],
        "forwardedProps": {},
        "messages": [{"id": format!("{run_id}-u"), "role": "user", "content": text}]
    }))
    .unwrap()
}

/// A backend that commits many users' calls together (PostgreSQL's
/// `agwire_accept_many`, `agwire_write_many`) answers each as if alone when
/// one call holds a value the database refuses (a NUL in text): only that
/// call fails. On a20bc6d4 PostgreSQL failed the whole batch (SQLSTATE
/// 22P05 was not taken as one call's fault): most valid accepts got an
/// error.
#[tokio::test]
async fn a_value_one_call_cannot_store_fails_that_call_only() {
    for (backend, store, _database) in backends().await {
        let mut tasks = Vec::new();
        for i in 0..60 {
            for (user, run_id, text) in [
                ("alice", format!("ok{i}"), "fine".to_owned()),
                ("mallory", format!("bad{i}\u{0}"), "poison\u{0}".to_owned()),
            ] {
                let store = store.clone();
                tasks.push((
                    user,
                    run_id.clone(),
                    tokio::spawn(async move {
                        let input = unvalidated(&thread(), &run_id, &text);
                        store.accept_run(new_run(user, &input, &run_id)).await
                    }),
                ));
            }
        }
        let mut accepted = Vec::new();
        for (user, run_id, task) in tasks {
            let answer = task.await.unwrap();
            if user == "alice" {
                let answer = answer.unwrap_or_else(|e| panic!("{backend}: {run_id}: {e}"));
                accepted.push(answer.task_id);
            }
        }
        assert_eq!(accepted.len(), 60, "{backend}");

        // The same for the writes of running runs: one run's end naming a
        // tool call the database cannot hold fails alone.
        while !claim_all(&*store).await.is_empty() {}
        let mut writes = Vec::new();
        for (i, task_id) in accepted.iter().enumerate() {
            let store = store.clone();
            let task_id = task_id.clone();
            writes.push(tokio::spawn(async move {
                if i == 7 {
                    let ask: Message = serde_json::from_value(json!({
                        "id": "a", "role": "assistant",
                        "toolCalls": [{"id": "c\u{0}", "type": "function",
                                       "function": {"name": "confirm\u{0}", "arguments": "{}"}}]}))
                    .unwrap();
                    let terminal = finished("t", "r");
                    let ending = Ending {
                        status: RunStatus::Succeeded,
                        error: None,
                        usage: None,
                        events: &[],
                        terminal: &terminal,
                        output: std::slice::from_ref(&ask),
                        ui_schema: None,
                        calls_expire_at: None,
                        tokens: 0,
                    };
                    return store.end_run(&task_id, &ending, 3).await.map(|_| ());
                }
                store.append_events(&task_id, &[text(i)]).await.map(|_| ())
            }));
        }
        for (i, write) in writes.into_iter().enumerate() {
            let answer = write.await.unwrap();
            if i != 7 {
                answer.unwrap_or_else(|e| panic!("{backend}: write {i}: {e}"));
            }
        }
    }
}

/// A run's end whose assistant message says something or carries a UI
/// shows in history; one that only called tools does not; tool messages
/// never do. History reads a day by index, never the thread.
#[tokio::test]
async fn history_reads_one_day_of_shown_messages_by_index() {
    const DAY: i64 = 86_400_000;
    for (backend, store, database) in backends().await {
        let t = thread();
        let mut said = Vec::new();
        for day in 0..5 {
            let now = 1_700_000_000_000 + day * DAY;
            let run_id = format!("h{day}");
            let accepted = store
                .accept_run(NewRun {
                    now_ms: now,
                    ..new_run("alice", &input(&t, &run_id, &format!("day {day}")), &run_id)
                })
                .await
                .unwrap();
            claim_all(&*store).await;
            let output: Vec<Message> = vec![
                serde_json::from_value(json!({"id": format!("{run_id}-call"), "role": "assistant",
                    "toolCalls": [{"id": format!("c{day}"), "type": "function",
                                   "function": {"name": "get_time", "arguments": "{}"}}]}))
                .unwrap(),
                serde_json::from_value(json!({"id": format!("{run_id}-tool"), "role": "tool",
                    "toolCallId": format!("c{day}"), "content": "noon"}))
                .unwrap(),
                serde_json::from_value(json!({"id": format!("{run_id}-a"), "role": "assistant",
                    "content": format!("answer {day}")}))
                .unwrap(),
            ];
            let terminal = finished(&t, &run_id);
            let ending = Ending {
                status: RunStatus::Succeeded,
                error: None,
                usage: None,
                events: &[],
                terminal: &terminal,
                output: &output,
                ui_schema: None,
                calls_expire_at: None,
                tokens: 0,
            };
            store
                .end_run(&accepted.task_id, &ending, now + 1000)
                .await
                .unwrap();
            said.push(now);
        }
        let last = store.last_shown_before(&t, i64::MAX).await.unwrap();
        assert_eq!(last, Some(said[4] + 1000), "{backend}");
        assert_eq!(
            store.last_shown_before(&t, said[2]).await.unwrap(),
            Some(said[1] + 1000),
            "{backend}"
        );
        assert_eq!(
            store.last_shown_before(&t, said[0]).await.unwrap(),
            None,
            "{backend}"
        );
        let day: Vec<String> = store
            .shown_messages(&t, said[3], said[3] + DAY)
            .await
            .unwrap()
            .iter()
            .map(|m| m.message.id().to_owned())
            .collect();
        assert_eq!(day, ["h3-u", "h3-a"], "{backend}");

        // The plan: a range of the shown-messages index, whatever the
        // thread holds.
        let plans = match &database {
            Some(pg) => {
                let pool = sqlx::PgPool::connect(&pg.url).await.unwrap();
                sqlx::query("SET enable_seqscan = off")
                    .execute(&pool)
                    .await
                    .unwrap();
                let mut plans = Vec::new();
                for query in [
                    "EXPLAIN SELECT MAX(created_at) FROM messages WHERE thread_id = 'x' AND shown AND created_at < 5",
                    "EXPLAIN SELECT seq FROM messages WHERE thread_id = 'x' AND shown AND created_at >= 1 AND created_at < 5",
                ] {
                    let lines: Vec<String> =
                        sqlx::query_scalar(query).fetch_all(&pool).await.unwrap();
                    plans.push(lines.join("\n"));
                }
                plans
            }
            None => Vec::new(),
        };
        for plan in &plans {
            assert!(plan.contains("messages_shown"), "{backend}: {plan}");
        }
    }
}

/// SQLite's plans for the same reads: the shown-messages index.
#[tokio::test]
async fn sqlite_reads_a_history_day_by_index() {
    let dir = std::env::temp_dir().join(format!("agwire-plan-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agwire.db");
    drop(SqliteStore::open(&path).await.unwrap());
    let connection = rusqlite::Connection::open(&path).unwrap();
    for query in [
        "EXPLAIN QUERY PLAN SELECT MAX(created_at) FROM messages WHERE thread_id = 'x' AND shown AND created_at < 5",
        "EXPLAIN QUERY PLAN SELECT seq, body FROM messages WHERE thread_id = 'x' AND shown AND created_at >= 1 AND created_at < 5 ORDER BY seq",
    ] {
        let rows: Vec<String> = connection
            .prepare(query)
            .unwrap()
            .query_map([], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let plan: Vec<&str> = rows.iter().map(String::as_str).collect();
        assert!(
            plan.iter()
                .any(|p| p.contains("USING") && p.contains("messages_shown")),
            "{query}: {plan:?}"
        );
    }
}

/// A thread is named by its first user message when that message is
/// stored — at its accept, or when a waiting run starts — so that listing
/// threads reads no message.
#[tokio::test]
async fn a_thread_is_named_when_its_first_user_message_is_stored() {
    for (backend, store, _database) in backends().await {
        // A whole history that opens with an assistant message: no name
        // until a user message comes.
        let t = thread();
        let opening: RunAgentInput = serde_json::from_value(json!({
            "threadId": t, "runId": "n1", "state": {}, "tools": [], "context": [],
            "forwardedProps": {},
            "messages": [{"id": "a0", "role": "assistant", "content": "Welcome"}]
        }))
        .unwrap();
        let whole = Admission {
            strategy: MultitaskStrategy::Reject,
            whole_history: true,
        };
        let first = store
            .accept_run(NewRun {
                admission: whole,
                ..new_run("alice", &opening, "n1")
            })
            .await
            .unwrap();
        let named = |t: String| {
            let store = store.clone();
            async move {
                store
                    .thread("alice", &t)
                    .await
                    .unwrap()
                    .unwrap()
                    .derived_title
            }
        };
        assert_eq!(named(t.clone()).await, None, "{backend}");
        claim_all(&*store).await;
        end(&*store, &first.task_id, &finished(&t, "n1"), &[]).await;
        // The next turn waits behind a running one, so its message goes in
        // when it starts: the name with it.
        let running = input(&t, "n2", "  \n Plan the trip \nmore");
        let second = store
            .accept_run(new_run("alice", &running, "n2"))
            .await
            .unwrap();
        assert_eq!(
            named(t.clone()).await.as_deref(),
            Some("Plan the trip"),
            "{backend}"
        );
        claim_all(&*store).await;
        let later = input(&t, "n3", "Something else");
        store
            .accept_run(queued_behind("alice", &later, "n3"))
            .await
            .unwrap();
        end(&*store, &second.task_id, &finished(&t, "n2"), &[]).await;
        claim_all(&*store).await;
        assert_eq!(
            named(t.clone()).await.as_deref(),
            Some("Plan the trip"),
            "{backend}"
        );

        // A first message that waits names the thread when it goes in.
        let u = thread();
        let blank: RunAgentInput = serde_json::from_value(json!({
            "threadId": u, "runId": "w1", "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": []
        }))
        .unwrap();
        store
            .accept_run(NewRun {
                admission: whole,
                ..new_run("alice", &blank, "w1")
            })
            .await
            .unwrap();
        claim_all(&*store).await;
        let waits = input(&u, "w2", "Queued question");
        store
            .accept_run(queued_behind("alice", &waits, "w2"))
            .await
            .unwrap();
        assert_eq!(named(u.clone()).await, None, "{backend}");
        let w1 = store.run("alice", "w1").await.unwrap().unwrap();
        end(&*store, &w1.task_id, &finished(&u, "w1"), &[]).await;
        claim_all(&*store).await;
        assert_eq!(
            named(u.clone()).await.as_deref(),
            Some("Queued question"),
            "{backend}"
        );
    }
}

/// Rows stored before this version, as the version-12 SQLite schema (or
/// migration 8 on PostgreSQL) held them: after the upgrade each shows in
/// history as before, names its thread, and refers to its attachments.
/// `$user` etc. are filled per backend.
const OLD_ROWS: &[&str] = &[
    "INSERT INTO threads (id, user_id, created_at, last_active_at) VALUES ('t-old', 'alice', 1, 1)",
    "INSERT INTO threads (id, user_id, created_at, last_active_at) VALUES ('t-bob', 'bob', 1, 1)",
    "INSERT INTO attachments (id, user_id, mime_type, size, created_at) VALUES \
     ('11111111-1111-4111-8111-111111111111', 'alice', 'image/png', 3, 1), \
     ('22222222-2222-4222-8222-222222222222', 'bob', 'image/png', 3, 1)",
    r#"INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at) VALUES
     ('t-old', 1, 'u1', 'r1', 'user', '{"id":"u1","role":"user","content":[{"type":"text","text":"\n Old question \nrest"},{"type":"image","source":{"type":"url","value":"attachment:11111111-1111-4111-8111-111111111111"}},{"type":"image","source":{"type":"url","value":"attachment:22222222-2222-4222-8222-222222222222"}}]}', 10),
     ('t-old', 2, 'a1', 'r1', 'assistant', '{"id":"a1","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}', 11),
     ('t-old', 3, 't1', 'r1', 'tool', '{"id":"t1","role":"tool","toolCallId":"c","content":"x"}', 12),
     ('t-old', 4, 'a2', 'r1', 'assistant', '{"id":"a2","role":"assistant","content":"Old answer \u0000"}', 13),
     ('t-old', 5, 'a3', 'r1', 'assistant', '{"id":"a3","role":"assistant","content":""}', 14),
     ('t-bob', 1, 'b1', 'r2', 'user', '{"id":"b1","role":"user","content":"bob"}', 10)"#,
    // A run whose request's client_time was a column of its own.
    r#"INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status, input, created_at, client_time) VALUES
     ('task-old', 'bob', 't-bob', 'r-old', 'h', FALSE, 'succeeded', '{}', 1,
      '{"device_timezone":"Asia/Tokyo","client_now_iso":"2026-11-24T09:30:00+09:00","client_epoch_ms":1795480200000}')"#,
    // A run still running, its log one row per event as it was stored
    // before logs were stored one row per write.
    "INSERT INTO threads (id, user_id, created_at, last_active_at) VALUES ('t-live', 'bob', 1, 1)",
    r#"INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status, input, created_at) VALUES
     ('task-live', 'bob', 't-live', 'r-live', 'h', TRUE, 'running', '{}', 1)"#,
    r#"INSERT INTO run_events (task_id, seq, event) VALUES
     ('task-live', 1, '{"type":"RUN_STARTED","threadId":"t-live","runId":"r-live"}'),
     ('task-live', 2, '{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}'),
     ('task-live', 3, '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"old\nline"}')"#,
];

/// What the upgrade made of [`OLD_ROWS`].
async fn check_upgraded(backend: &str, store: &dyn Store) {
    let shown: Vec<String> = store
        .shown_messages("t-old", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|m| m.message.id().to_owned())
        .collect();
    assert_eq!(shown, ["u1", "a2"], "{backend}");
    let thread = store.thread("alice", "t-old").await.unwrap().unwrap();
    assert_eq!(
        agwire_service::threads::title(&thread),
        "Old question",
        "{backend}"
    );
    let bobs = store.thread("bob", "t-bob").await.unwrap().unwrap();
    assert_eq!(agwire_service::threads::title(&bobs), "bob", "{backend}");
    // Its client_time is now one of the run's options.
    let old_run = store.run("bob", "r-old").await.unwrap().unwrap();
    let time = old_run.options.client_time.expect("client_time kept");
    assert_eq!(time.device_timezone_name, "Asia/Tokyo", "{backend}");
    assert_eq!(time.epoch_ms, 1_795_480_200_000, "{backend}");
    // A log stored one row per event reads as before, and goes on one row
    // per write, numbered on from its last event; a resume from any point
    // reads exactly what follows it.
    let numbers =
        |events: Vec<(u64, Event)>| events.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    let old = store.events_after("task-live", 0).await.unwrap();
    assert_eq!(numbers(old.clone()), [1, 2, 3], "{backend}");
    match &old[2].1 {
        Event::TextMessageContent(e) => assert_eq!(e.delta, "old\nline", "{backend}"),
        other => panic!("{backend}: {other:?}"),
    }
    assert_eq!(
        store
            .append_events("task-live", &[text(4), text(5)])
            .await
            .unwrap(),
        4,
        "{backend}"
    );
    let last = store
        .end_run(
            "task-live",
            &Ending {
                status: RunStatus::Succeeded,
                error: None,
                usage: None,
                events: &[text(6)],
                terminal: &finished("t-live", "r-live"),
                output: &[],
                ui_schema: None,
                calls_expire_at: None,
                tokens: 0,
            },
            3,
        )
        .await
        .unwrap();
    assert_eq!(last, Some(7), "{backend}");
    for after in 0..=7 {
        assert_eq!(
            numbers(store.events_after("task-live", after).await.unwrap()),
            ((after + 1)..=7).collect::<Vec<_>>(),
            "{backend}: after {after}"
        );
    }
    let log = whole_log(store, "task-live").await;
    assert!(
        matches!(&log[4], Event::TextMessageContent(e) if e.delta == "5 "),
        "{backend}"
    );
    assert!(matches!(&log[6], Event::RunFinished(_)), "{backend}");
    // Alice's own attachment goes with her thread; bob's is not hers.
    let deleted = store.delete_thread("alice", "t-old").await.unwrap();
    assert_eq!(
        deleted.attachments,
        ["11111111-1111-4111-8111-111111111111"],
        "{backend}"
    );
    assert!(
        store
            .attachment("22222222-2222-4222-8222-222222222222")
            .await
            .unwrap()
            .is_some(),
        "{backend}"
    );
}

#[tokio::test]
async fn rows_stored_by_the_previous_schema_read_as_before_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("agwire-upgrade-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agwire.db");
    {
        let connection = rusqlite::Connection::open(&path).unwrap();
        let root = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../agwire-store/migrations/sqlite"
        );
        let mut files: Vec<_> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_str().unwrap() < "0013")
            .collect();
        files.sort();
        assert_eq!(files.len(), 12);
        for file in &files {
            connection
                .execute_batch(&std::fs::read_to_string(file).unwrap())
                .unwrap();
        }
        connection
            .execute_batch("PRAGMA user_version = 12")
            .unwrap();
        for row in OLD_ROWS {
            connection.execute_batch(row).unwrap();
        }
    }
    let store = SqliteStore::open(&path).await.unwrap();
    check_upgraded("sqlite", &store).await;
}

#[tokio::test]
async fn rows_stored_by_the_previous_schema_read_as_before_on_postgres() {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    {
        // The migrations before this version, as a binary of that version
        // applied them (same files, same checksums).
        let old = std::env::temp_dir().join(format!("agwire-pg-old-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&old).unwrap();
        let root = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../agwire-store/migrations/postgres"
        );
        for entry in std::fs::read_dir(root).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap().to_str().unwrap() < "0009" {
                std::fs::copy(&path, old.join(path.file_name().unwrap())).unwrap();
            }
        }
        let pool = sqlx::PgPool::connect(&database.url).await.unwrap();
        sqlx::migrate::Migrator::new(old.as_path())
            .await
            .unwrap()
            .run(&pool)
            .await
            .unwrap();
        for row in OLD_ROWS {
            sqlx::raw_sql(sqlx::AssertSqlSafe(*row))
                .execute(&pool)
                .await
                .unwrap();
        }
        // What the previous binary's functions.sql left in place: its
        // `agwire_accept`, whose argument `p_client_time` is now
        // `p_options` (`CREATE OR REPLACE` cannot rename an argument, so a
        // migration must drop it first, or connecting fails). Its body does
        // not matter: only its signature.
        sqlx::raw_sql(
            "CREATE OR REPLACE FUNCTION agwire_accept(
                p_task TEXT, p_user TEXT, p_thread TEXT, p_run TEXT, p_hash TEXT, p_input TEXT,
                p_mode TEXT, p_client_time TEXT, p_enqueue BOOLEAN, p_dedupe BOOLEAN,
                p_ids TEXT[], p_roles TEXT[], p_bodies TEXT[], p_pending TEXT, p_now BIGINT,
                p_owner TEXT, p_lease_ms BIGINT, p_answers TEXT[], p_strict BOOLEAN,
                p_shown BOOLEAN[], p_title TEXT, p_attachments TEXT[]
            ) RETURNS TABLE (outcome TEXT, task_id TEXT, created BOOLEAN, waiting BOOLEAN)
            LANGUAGE sql AS 'SELECT NULL::TEXT, NULL::TEXT, NULL::BOOLEAN, NULL::BOOLEAN'",
        )
        .execute(&pool)
        .await
        .unwrap();
        // And its `agwire_accept_many`, which answered no `stopped` column
        // (a function's result cannot change in place either: migration
        // 0011 drops it).
        sqlx::raw_sql(
            "CREATE OR REPLACE FUNCTION agwire_accept_many(p_calls JSONB, p_lease_ms BIGINT)
            RETURNS TABLE (n INT, outcome TEXT, task_id TEXT, created BOOLEAN, waiting BOOLEAN)
            LANGUAGE sql AS 'SELECT NULL::INT, NULL::TEXT, NULL::TEXT, NULL::BOOLEAN, NULL::BOOLEAN'",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    }
    let store = PgStore::connect(&database.url).await.unwrap();
    check_upgraded("postgres", &store).await;
    // The functions in place are this binary's: a run is accepted.
    let t = thread();
    store
        .accept_run(new_run("alice", &input(&t, "after-upgrade", "hi"), "h"))
        .await
        .unwrap();
}

/// The log's shape (issue 47): each write of a run is one row — an append
/// of any number of events, an end with its last events and terminal event,
/// the opening `RUN_STARTED` a run that ended before writing gets — holding
/// `n_events` events from `seq`, on both backends.
#[tokio::test]
async fn each_write_of_a_run_is_one_row_of_its_log() {
    let dir = std::env::temp_dir().join(format!("agwire-shape-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agwire.db");
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let mut backends = vec![("sqlite", sqlite, None)];
    if let Some(database) = PgDatabase::create().await {
        let store: Arc<dyn Store> = Arc::new(PgStore::connect(&database.url).await.unwrap());
        backends.push(("postgres", store, Some(database)));
    }
    for (backend, store, database) in backends {
        let rows = |task: String| {
            let url = database.as_ref().map(|d| d.url.clone());
            let path = path.clone();
            async move {
                let sql = "SELECT seq, n_events FROM run_events WHERE task_id = $1 ORDER BY seq";
                match url {
                    Some(url) => {
                        let pool = sqlx::PgPool::connect(&url).await.unwrap();
                        let rows: Vec<(i64, i32)> = sqlx::query_as(sql)
                            .bind(&task)
                            .fetch_all(&pool)
                            .await
                            .unwrap();
                        pool.close().await;
                        rows.into_iter()
                            .map(|(s, n)| (s, i64::from(n)))
                            .collect::<Vec<_>>()
                    }
                    None => rusqlite::Connection::open(&path)
                        .unwrap()
                        .prepare(sql)
                        .unwrap()
                        .query_map([&task], |r| Ok((r.get(0)?, r.get(1)?)))
                        .unwrap()
                        .collect::<Result<Vec<(i64, i64)>, _>>()
                        .unwrap(),
                }
            }
        };
        // Appends of one and of eight events, then an end with one more.
        let t = thread();
        let accepted = store
            .accept_run(new_run("alice", &input(&t, "r1", "hi"), "h"))
            .await
            .unwrap();
        claim_all(&*store).await;
        let task = accepted.task_id.clone();
        store
            .append_events(&task, &[run_started(&t, "r1")])
            .await
            .unwrap();
        let texts: Vec<Event> = (0..8).map(text).collect();
        store.append_events(&task, &texts).await.unwrap();
        let ending = Ending {
            status: RunStatus::Succeeded,
            error: None,
            usage: None,
            events: &[text(8)],
            terminal: &finished(&t, "r1"),
            output: &[],
            ui_schema: None,
            calls_expire_at: None,
            tokens: 0,
        };
        assert_eq!(
            store.end_run(&task, &ending, 3).await.unwrap(),
            Some(11),
            "{backend}"
        );
        assert_eq!(
            rows(task.clone()).await,
            [(1, 1), (2, 8), (10, 2)],
            "{backend}"
        );

        // A run that fails before writing: `RUN_STARTED` and its terminal
        // event, one row.
        let t = thread();
        let accepted = store
            .accept_run(new_run("alice", &input(&t, "r2", "hi"), "h"))
            .await
            .unwrap();
        claim_all(&*store).await;
        let failure = Event::RunError(RunErrorEvent::new("no"));
        assert_eq!(
            end(&*store, &accepted.task_id, &failure, &[]).await,
            Some(2),
            "{backend}"
        );
        assert_eq!(rows(accepted.task_id.clone()).await, [(1, 2)], "{backend}");
        let log = whole_log(&*store, &accepted.task_id).await;
        assert!(
            matches!(log[..], [Event::RunStarted(_), Event::RunError(_)]),
            "{backend}"
        );

        // A queued run cancelled: its whole log, one row.
        let t = thread();
        let first = store
            .accept_run(new_run("alice", &input(&t, "r3", "hi"), "h"))
            .await
            .unwrap();
        let waiting = store
            .accept_run(queued_behind("alice", &input(&t, "r4", "hi"), "h4"))
            .await
            .unwrap();
        assert_ne!(first.task_id, waiting.task_id);
        let [started, cancelled] = agwire_service::store::cancelled_log(&t, "r4");
        assert_eq!(
            store
                .cancel_queued(&waiting.task_id, &[started, cancelled], 3)
                .await
                .unwrap(),
            Some(1),
            "{backend}"
        );
        assert_eq!(rows(waiting.task_id.clone()).await, [(1, 2)], "{backend}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The connections PostgreSQL's store keeps between writes (its group
/// commits' lanes, the pool's idle ones) are not used once the server has
/// cut them: after every connection to the database is terminated (as a
/// restarted server would), an accept, its run's writes and a read all
/// succeed. A kept connection idle past a second is tested before use.
#[tokio::test]
async fn postgres_writes_go_on_after_the_server_cut_every_connection() {
    use sqlx::Connection as _;
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let store = PgStore::connect(&database.url).await.unwrap();
    let whole_run = |run_id: &'static str| {
        let store = &store;
        async move {
            let t = thread();
            let run = input(&t, run_id, "hello");
            let accepted = store
                .accept_run(new_run("alice", &run, run_id))
                .await
                .map_err(|e| ("accept", e))?;
            let nothing: OnClaim = Arc::new(|_: &str| {});
            let claimed = store
                .claim_runnable(10, 2, nothing.clone(), nothing)
                .await
                .map_err(|e| ("claim", e))?;
            assert_eq!(claimed.len(), 1);
            store
                .append_events(&accepted.task_id, &[run_started(&t, run_id), text(1)])
                .await
                .map_err(|e| ("append", e))?;
            let ended = end(store, &accepted.task_id, &finished(&t, run_id), &[]).await;
            assert_eq!(ended, Some(3));
            Ok::<_, (&str, Error)>(whole_log(store, &accepted.task_id).await.len())
        }
    };
    assert_eq!(whole_run("before").await.unwrap(), 3);
    let mut admin = sqlx::PgConnection::connect(&database.url).await.unwrap();
    let me: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let others: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> $1",
    )
    .bind(me)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    let mut cut = 0;
    for pid in others {
        let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .fetch_one(&mut admin)
            .await
            .unwrap();
        cut += usize::from(terminated);
    }
    assert!(cut >= 2, "only {cut} connections were cut");
    admin.close().await.unwrap();
    // Past the idle time after which a connection is tested (the server
    // closes a terminated backend's socket at once; a write on one used
    // within that second fails as a lost connection would).
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    assert_eq!(whole_run("after").await.unwrap(), 3);
}
