//! The multitask strategies of `RunStore::accept_run` (what a run posted to
//! a busy thread does), on every backend: `interrupt` and `rollback` stop
//! the thread's active runs in the accept's own write.

use agwire_service::store::{Stopped, cancelled_log};

use super::*;

/// `run` posted with `strategy`.
fn posted<'a>(
    user: &'a str,
    input: &'a RunAgentInput,
    hash: &'a str,
    strategy: MultitaskStrategy,
) -> NewRun<'a> {
    NewRun {
        admission: Admission {
            strategy,
            whole_history: false,
        },
        ..new_run(user, input, hash)
    }
}

fn said(id: &str, text: &str) -> Message {
    serde_json::from_value(json!({"id": id, "role": "assistant", "content": text})).unwrap()
}

/// Ends a running run as its executor does when told to stop: cancelled,
/// with what it said.
async fn end_cancelled(
    store: &dyn Store,
    task_id: &str,
    thread: &str,
    run_id: &str,
    output: &[Message],
) {
    let [_, terminal] = cancelled_log(thread, run_id);
    let ending = Ending {
        status: RunStatus::Cancelled,
        error: None,
        usage: None,
        events: &[],
        terminal: &terminal,
        output,
        ui_schema: None,
        calls_expire_at: None,
        tokens: 0,
    };
    assert!(store.end_run(task_id, &ending, 3).await.unwrap().is_some());
}

async fn status(store: &dyn Store, run_id: &str) -> RunStatus {
    store.run("alice", run_id).await.unwrap().unwrap().status
}

#[tokio::test]
async fn interrupt_ends_the_waiting_runs_and_stops_the_running_one_keeping_what_it_said() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        let first = input(&t, "i1", "first");
        let a1 = store
            .accept_run(new_run("alice", &first, "i1"))
            .await
            .unwrap();
        assert_eq!(claim_all(&*store).await.len(), 1, "{backend}");
        let second = input(&t, "i2", "second");
        let a2 = store
            .accept_run(queued_behind("alice", &second, "i2"))
            .await
            .unwrap();
        assert!(a2.waiting && a2.stopped.is_empty(), "{backend}: {a2:?}");

        let third = input(&t, "i3", "third");
        let a3 = store
            .accept_run(posted("alice", &third, "i3", MultitaskStrategy::Interrupt))
            .await
            .unwrap();
        assert!(a3.waiting, "{backend}: waits for the running run to stop");
        assert_eq!(
            a3.stopped,
            [
                Stopped {
                    task_id: a1.task_id.clone(),
                    run_id: "i1".into(),
                    ended: None,
                },
                Stopped {
                    task_id: a2.task_id.clone(),
                    run_id: "i2".into(),
                    ended: Some(1),
                },
            ],
            "{backend}"
        );
        // The waiting one ended in the accept's write, a valid run.
        assert_eq!(
            status(&*store, "i2").await,
            RunStatus::Cancelled,
            "{backend}"
        );
        assert_eq!(
            whole_log(&*store, &a2.task_id).await,
            cancelled_log(&t, "i2"),
            "{backend}"
        );
        // The running one runs on until its executor stops it; the new run
        // waits for it.
        assert_eq!(status(&*store, "i1").await, RunStatus::Running, "{backend}");
        assert!(claim_all(&*store).await.is_empty(), "{backend}");
        end_cancelled(&*store, &a1.task_id, &t, "i1", &[said("i1-a", "partial")]).await;
        assert_eq!(texts(&*store, &t).await, ["first", "partial"], "{backend}");

        let claimed = claim_all(&*store).await;
        assert_eq!(claimed.len(), 1, "{backend}");
        assert_eq!(claimed[0].task_id, a3.task_id, "{backend}");
        // The interrupted waiting turn never reached the thread.
        assert_eq!(
            texts(&*store, &t).await,
            ["first", "partial", "third"],
            "{backend}"
        );

        // A re-post of the interrupting request is the original acceptance:
        // nothing is stopped again.
        let again = store
            .accept_run(posted("alice", &third, "i3", MultitaskStrategy::Interrupt))
            .await
            .unwrap();
        assert!(
            again.replayed && again.stopped.is_empty(),
            "{backend}: {again:?}"
        );
        assert_eq!(status(&*store, "i3").await, RunStatus::Running, "{backend}");

        // On an idle thread every strategy just accepts.
        let idle = thread();
        for strategy in MultitaskStrategy::ALL {
            let run_id = format!("idle-{strategy}");
            let turn = input(&idle, &run_id, "hi");
            let accepted = store
                .accept_run(posted("alice", &turn, &run_id, strategy))
                .await
                .unwrap();
            assert!(
                !accepted.waiting && accepted.stopped.is_empty(),
                "{backend} {strategy}: {accepted:?}"
            );
            let claimed = claim_all(&*store).await;
            end(&*store, &claimed[0].task_id, &finished(&idle, &run_id), &[]).await;
        }
    }
}

#[tokio::test]
async fn rollback_leaves_the_thread_as_before_the_stopped_run() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        turn(&*store, "alice", &input(&t, "b0", "book it"), 10, &["c1"])
            .await
            .unwrap();
        let before = texts(&*store, &t).await;
        let pending = |store: Arc<dyn Store>, t: String| async move {
            store
                .pending_tool_calls(&t, 0)
                .await
                .unwrap()
                .into_iter()
                .map(|c| c.tool_call_id)
                .collect::<Vec<_>>()
        };
        assert_eq!(pending(store.clone(), t.clone()).await, ["c1"], "{backend}");

        // b1 answers c1 and runs.
        let b1 = answering(&t, "b1", &["c1"]);
        let a1 = store.accept_run(new_run("alice", &b1, "b1")).await.unwrap();
        claim_all(&*store).await;
        assert_ne!(texts(&*store, &t).await, before, "{backend}");
        assert!(
            pending(store.clone(), t.clone()).await.is_empty(),
            "{backend}"
        );

        // b2 rolls it back — and may answer c1 again, pending once more.
        let b2 = answering(&t, "b2", &["c1"]);
        let a2 = store
            .accept_run(posted("alice", &b2, "b2", MultitaskStrategy::Rollback))
            .await
            .unwrap();
        assert!(a2.waiting, "{backend}");
        assert_eq!(
            a2.stopped,
            [Stopped {
                task_id: a1.task_id.clone(),
                run_id: "b1".into(),
                ended: None,
            }],
            "{backend}"
        );
        assert_eq!(
            texts(&*store, &t).await,
            before,
            "{backend}: b1's turn is gone"
        );

        // b1's executor ends it (here as if it finished before hearing the
        // stop): nothing of it reaches the thread, no call it asked is
        // pending, and its log still ends as given.
        let b1_call: Message = serde_json::from_value(json!({"id": "b1-a", "role": "assistant", "content": "booked", "toolCalls": [{"id": "c2", "type": "function", "function": {"name": "confirm_action", "arguments": "{}"}}]})).unwrap();
        let terminal = Event::RunFinished(RunFinishedEvent::new(t.clone(), "b1").outcome(
            agwire_core::RunFinishedOutcome::Success {
                pending_tool_call_ids: Some(vec!["c2".into()]),
            },
        ));
        end(&*store, &a1.task_id, &terminal, &[b1_call]).await;
        assert_eq!(texts(&*store, &t).await, before, "{backend}");
        assert_eq!(
            whole_log(&*store, &a1.task_id).await.last(),
            Some(&terminal),
            "{backend}"
        );
        // (c1 is b2's answer now; c2, b1's question, was never asked.)
        assert!(
            pending(store.clone(), t.clone()).await.is_empty(),
            "{backend}"
        );

        // b2 starts: its turn (and its answer to c1) joins the thread.
        let claimed = claim_all(&*store).await;
        assert_eq!(claimed[0].task_id, a2.task_id, "{backend}");
        let mut expected = before.clone();
        expected.push("b2".into());
        assert_eq!(texts(&*store, &t).await, expected, "{backend}");
        assert!(
            pending(store.clone(), t.clone()).await.is_empty(),
            "{backend}"
        );
        end(&*store, &a2.task_id, &finished(&t, "b2"), &[]).await;

        // A thread whose only turn is rolled back is unnamed again; the
        // next turn names it.
        let fresh = thread();
        let r1 = input(&fresh, "n1", "first words");
        store.accept_run(new_run("alice", &r1, "n1")).await.unwrap();
        claim_all(&*store).await;
        let r2 = input(&fresh, "n2", "other words");
        store
            .accept_run(posted("alice", &r2, "n2", MultitaskStrategy::Rollback))
            .await
            .unwrap();
        assert!(texts(&*store, &fresh).await.is_empty(), "{backend}");
        let named = store.thread("alice", &fresh).await.unwrap().unwrap();
        assert_eq!(agwire_service::threads::title(&named), "", "{backend}");
        let n1_task = store.run("alice", "n1").await.unwrap().unwrap().task_id;
        end_cancelled(&*store, &n1_task, &fresh, "n1", &[said("n1-a", "half")]).await;
        claim_all(&*store).await;
        assert_eq!(texts(&*store, &fresh).await, ["other words"], "{backend}");
        let named = store.thread("alice", &fresh).await.unwrap().unwrap();
        assert_eq!(
            agwire_service::threads::title(&named),
            "other words",
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_refused_interrupt_or_rollback_stops_nothing() {
    for (backend, store, _database) in backends().await {
        let t = thread();
        turn(&*store, "alice", &input(&t, "x0", "book it"), 10, &["c1"])
            .await
            .unwrap();
        let x1 = answering(&t, "x1", &["c1"]);
        let a1 = store.accept_run(new_run("alice", &x1, "x1")).await.unwrap();
        claim_all(&*store).await;
        // Answers to a call the thread never asked, or asked and closed by
        // a run that is not taken back: refused before anything is written.
        for (strategy, answer) in [
            (MultitaskStrategy::Rollback, "c9"),
            (MultitaskStrategy::Interrupt, "c9"),
            (MultitaskStrategy::Interrupt, "c1"),
        ] {
            let run_id = format!("x-{strategy}-{answer}");
            let refused = store
                .accept_run(posted(
                    "alice",
                    &answering(&t, &run_id, &[answer]),
                    &run_id,
                    strategy,
                ))
                .await;
            assert!(
                matches!(
                    refused,
                    Err(Error::ToolCallNotPending { .. } | Error::ToolCallAnswered { .. })
                ),
                "{backend} {strategy} {answer}: {refused:?}"
            );
        }
        let busy = input(&t, "x2", "again");
        assert!(
            matches!(
                store
                    .accept_run(posted("alice", &busy, "x2", MultitaskStrategy::Reject))
                    .await,
                Err(Error::ThreadBusy)
            ),
            "{backend}"
        );
        // x1 was never marked: it ends, and what it said stays.
        assert_eq!(status(&*store, "x1").await, RunStatus::Running, "{backend}");
        end(
            &*store,
            &a1.task_id,
            &finished(&t, "x1"),
            &[said("x1-a", "done")],
        )
        .await;
        assert_eq!(
            texts(&*store, &t).await.last().map(String::as_str),
            Some("done"),
            "{backend}"
        );
    }
}

/// Two interrupting posts at once on one busy thread — on PostgreSQL from
/// two replicas — resolve to one outcome: the running run is stopped by
/// both, the first post to commit is ended by the second, and only the
/// second runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn simultaneous_interrupts_leave_exactly_one_new_run() {
    for (backend, store, database) in backends().await {
        let other: Arc<dyn Store> = match &database {
            Some(database) => Arc::new(PgStore::connect(&database.url).await.unwrap()),
            None => store.clone(),
        };
        for round in 0..10 {
            let t = thread();
            let running = input(&t, &format!("s{round}-0"), "first");
            let a0 = store
                .accept_run(new_run("alice", &running, "s0"))
                .await
                .unwrap();
            claim_all(&*store).await;
            let (left, right) = (
                input(&t, &format!("s{round}-l"), "left"),
                input(&t, &format!("s{round}-r"), "right"),
            );
            let (l, r) = tokio::join!(
                store.accept_run(posted("alice", &left, "l", MultitaskStrategy::Interrupt)),
                other.accept_run(posted("alice", &right, "r", MultitaskStrategy::Interrupt)),
            );
            let (l, r) = (l.unwrap(), r.unwrap());
            // The later of the two ended the earlier (still waiting).
            let (earlier, later) = if r.stopped.iter().any(|s| s.task_id == l.task_id) {
                (&l, &r)
            } else {
                (&r, &l)
            };
            let ended = later
                .stopped
                .iter()
                .find(|s| s.task_id == earlier.task_id)
                .unwrap_or_else(|| panic!("{backend}: neither ended the other: {l:?} {r:?}"));
            assert_eq!(ended.ended, Some(1), "{backend}");
            for accepted in [&l, &r] {
                assert!(
                    accepted
                        .stopped
                        .iter()
                        .any(|s| s.task_id == a0.task_id && s.ended.is_none()),
                    "{backend}: both stop the running run: {accepted:?}"
                );
            }
            end_cancelled(&*store, &a0.task_id, &t, &running.run_id, &[]).await;
            let claimed = claim_all(&*store).await;
            assert_eq!(claimed.len(), 1, "{backend}");
            assert_eq!(claimed[0].task_id, later.task_id, "{backend}");
            let earlier_run = if earlier.task_id == l.task_id {
                &left
            } else {
                &right
            };
            assert_eq!(
                status(&*store, &earlier_run.run_id).await,
                RunStatus::Cancelled,
                "{backend}"
            );
            end(&*store, &later.task_id, &finished(&t, "x"), &[]).await;
        }
    }
}

/// PostgreSQL: a stop whose word was lost (here: marked in the database
/// with no `NOTIFY`) still reaches the replica executing the run, at its
/// next lease renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_whose_word_was_lost_is_heard_at_the_next_lease_renewal() {
    use agwire_service::store::Change;
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let lease = std::time::Duration::from_millis(400);
    let store = PgStore::connect_with_lease(&database.url, lease)
        .await
        .unwrap();
    let mut changes = store.changes().unwrap();
    let t = thread();
    let accepted = store
        .accept_run(new_run("alice", &input(&t, "lost", "hi"), "h"))
        .await
        .unwrap();
    claim_all(&store).await;
    let pool = sqlx::PgPool::connect(&database.url).await.unwrap();
    sqlx::query("UPDATE runs SET stop_requested = 'interrupt' WHERE task_id = $1")
        .bind(&accepted.task_id)
        .execute(&pool)
        .await
        .unwrap();
    let heard = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            if let Ok(Change::CancelRequested { task_id }) = changes.recv().await
                && task_id == accepted.task_id
            {
                return;
            }
        }
    })
    .await;
    assert!(heard.is_ok(), "no stop heard within 10 s (lease {lease:?})");
}
