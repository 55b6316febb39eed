//! Claims, leases and hand-offs: the dispatcher takes runnable runs from
//! the store (in batches, or one accept at a time) and starts each on a task
//! of its own; runs a dead process left behind end as failed; what other
//! replicas commit reaches this one's followers and executions.

use std::sync::Arc;
use std::time::Duration;

use agwire_core::{Event, RunErrorEvent};
use serde_json::json;
use tokio::sync::broadcast;
use tracing::Instrument;

use super::{Engine, now_ms};
use crate::error::Error;
use crate::run::RunStatus;
use crate::store::{Change, Claimed, Ending, OnClaim, RunRecord, StartHere};

/// Runs the dispatcher takes per claim (one transaction).
const CLAIM_BATCH: usize = 64;
/// How often the dispatcher looks for runnable runs nobody told it about
/// (a safety net: accepts and endings wake it at once), for runs a dead
/// replica abandoned, and for approvals past their expiry.
const SWEEP_PERIOD: Duration = Duration::from_secs(5);

impl Engine {
    /// Ends a run whose process is gone (a restart, or a replica that died)
    /// as failed, code `server_restart`, after a valid start of its log. A
    /// run that already ended is left as it is (another survivor was first).
    pub(super) async fn end_interrupted(&self, run: &RunRecord) -> Result<(), Error> {
        let why = "the server restarted while the run was in progress";
        let error = Event::RunError(RunErrorEvent::new(why).code("server_restart"));
        let detail = json!({"message": why, "code": "server_restart"});
        let ending = Ending {
            status: RunStatus::Failed,
            error: Some(&detail),
            usage: None,
            events: &[],
            terminal: &error,
            output: &[],
            ui_schema: None,
            calls_expire_at: None,
            tokens: 0,
        };
        if let Some(seq) = self.store.end_run(&run.task_id, &ending, now_ms()).await? {
            self.hub.publish(&run.task_id, seq, error);
            tracing::warn!(
                run_id = run.run_id,
                thread_id = run.thread_id,
                "run interrupted (its process is gone), marked failed"
            );
        }
        Ok(())
    }

    /// What other replicas commit, applied here: their runs' events to the
    /// followers here, cancels of runs executing here, runnable runs to the
    /// dispatcher.
    pub(super) async fn follow_changes(&self, mut changes: broadcast::Receiver<Change>) {
        loop {
            let change = tokio::select! {
                () = self.stop.cancelled() => return,
                change = changes.recv() => change,
            };
            match change {
                Ok(Change::Appended {
                    task_id,
                    first,
                    last,
                }) => {
                    if self.hub.followed_from_elsewhere(&task_id) {
                        self.relay(&task_id, first, last).await;
                    }
                }
                Ok(Change::CancelRequested { task_id }) => {
                    let token = self
                        .running
                        .lock()
                        .ok()
                        .and_then(|r| r.get(&task_id).cloned());
                    if let Some(token) = token {
                        token.cancel();
                    }
                }
                Ok(Change::Runnable) => self.dispatch.notify_one(),
                // Missed changes: the dispatcher looks; followers re-read
                // the log on their own within FOLLOW_RECHECK.
                Err(broadcast::error::RecvError::Lagged(_)) => self.dispatch.notify_one(),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Publishes events `first..=last` of a run executing elsewhere to its
    /// followers here, read from the log.
    pub(super) async fn relay(&self, task_id: &str, first: u64, last: u64) {
        match self
            .store
            .events_after(task_id, first.saturating_sub(1))
            .await
        {
            Ok(events) => {
                for (seq, event) in events.into_iter().take_while(|(seq, _)| *seq <= last) {
                    self.hub.publish(task_id, seq, event);
                }
            }
            Err(error) => tracing::warn!(%error, "could not read a run's log to relay it"),
        }
    }

    /// Executes runnable runs (claimed from the store in batches) whenever
    /// woken, and every [`SWEEP_PERIOD`] in case a wake-up was missed, until
    /// the drain.
    pub(super) async fn dispatch_loop(&self) {
        // A tick every period however busy the dispatcher is (a sleep in the
        // select below would start over at every wake-up, and under steady
        // load never end).
        let mut sweep = tokio::time::interval(SWEEP_PERIOD);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        sweep.reset();
        loop {
            if self.draining.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            let hooks = self.claim_hooks();
            // Held until the runs claimed execute: an accept meanwhile
            // cannot start its run in one of them.
            let places = self.places.hold_claim(self.max_concurrent, CLAIM_BATCH);
            let limit = u32::try_from(places.count()).unwrap_or(u32::MAX);
            let claim = async {
                if limit == 0 {
                    return Ok(Vec::new());
                }
                self.store
                    .claim_runnable(limit, now_ms(), hooks.register, hooks.forget)
                    .await
            };
            match claim.await {
                Ok(claimed) => {
                    let full = limit > 0 && claimed.len() == limit as usize;
                    for run in claimed {
                        self.spawn_execution(run);
                    }
                    drop(places);
                    if full {
                        continue;
                    }
                }
                Err(error) => {
                    drop(places);
                    tracing::error!(%error, "could not claim runs");
                }
            }
            tokio::select! {
                () = self.dispatch.notified() => {}
                _ = sweep.tick() => {
                    self.end_abandoned().await;
                    self.expire_tool_calls().await;
                }
                () = self.stop.cancelled() => return,
            }
        }
    }

    /// What registers a run taken for execution here (its cancel token,
    /// before the taking commits: a cancel that sees the run `running` finds
    /// it), and forgets it if that commit fails.
    pub(super) fn claim_hooks(&self) -> StartHere {
        let (running, shutdown) = (self.running.clone(), self.shutdown.clone());
        let register: OnClaim = Arc::new(move |task_id: &str| {
            if let Ok(mut running) = running.lock() {
                running.insert(task_id.to_owned(), shutdown.child_token());
            }
        });
        let running = self.running.clone();
        let forget: OnClaim = Arc::new(move |task_id: &str| {
            if let Ok(mut running) = running.lock() {
                running.remove(task_id);
            }
        });
        StartHere { register, forget }
    }

    /// Ends the runs a dead replica abandoned (their lease ran out).
    pub(super) async fn end_abandoned(&self) {
        let abandoned = match self.store.abandoned_runs().await {
            Ok(abandoned) => abandoned,
            Err(error) => {
                tracing::error!(%error, "could not look for abandoned runs");
                return;
            }
        };
        for run in abandoned {
            if let Err(error) = self.end_interrupted(&run).await {
                tracing::error!(%error, "could not end an abandoned run");
            }
        }
    }

    /// Marks the approvals (pending frontend tool calls) past their expiry
    /// expired, and counts them.
    pub(super) async fn expire_tool_calls(&self) {
        match self.store.expire_tool_calls(now_ms()).await {
            Ok(0) => {}
            Ok(expired) => {
                self.metrics.tool_calls_expired(expired);
                tracing::info!(expired, "pending tool calls expired");
            }
            Err(error) => tracing::error!(%error, "could not sweep expired tool calls"),
        }
    }

    /// Executes a claimed run on a task of its own.
    pub(super) fn spawn_execution(&self, run: Claimed) {
        let cancel = self
            .running
            .lock()
            .ok()
            .and_then(|running| running.get(&run.task_id).cloned())
            .unwrap_or_else(|| self.shutdown.child_token());
        let service = self.clone();
        self.places.execution_started();
        let span = tracing::info_span!(
            parent: None,
            "run",
            run_id = %run.input.run_id,
            thread_id = %run.input.thread_id,
            user = %run.user_id,
            trace_id = tracing::field::Empty,
        );
        // Exported (when telemetry is on) in the trace that accepted it.
        let traced = self.telemetry.run_span(&run, &span);
        // Boxed: the task holds a pointer, not the claim, for the whole run.
        let run = Box::new(run);
        self.executions.spawn(
            async move {
                let producer = service.hub.produce(&run.task_id);
                let task_id = run.task_id.clone();
                service.execute(run, cancel, &producer).await;
                if let Ok(mut running) = service.running.lock() {
                    running.remove(&task_id);
                }
                drop(producer);
                service.places.execution_ended(service.max_concurrent);
                // The thread's next run (if one waits) is runnable now: a
                // store shared with other processes tells every one of
                // them (PostgreSQL's `r` from the end's write); else look.
                if !service.store_changes {
                    service.dispatch.notify_one();
                }
            }
            .instrument(traced)
            .instrument(span),
        );
    }
}
