//! The scheduler: starts each due tick of every job as an automation run on
//! the job's thread, at most once (see [`crate::jobs`]).

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::schedule::Schedule;
use super::tick_input;
use crate::engine::Engine;
use crate::error::{Error, StoreError};
use crate::run::{Admission, MultitaskStrategy, RunOptions, RunRequest, RuntimeMode};

/// Due jobs started per scheduler pass.
const BATCH: u32 = 100;

/// Starts due job ticks as runs of an [`Engine`].
#[derive(Debug, Clone)]
pub struct Scheduler {
    engine: Engine,
}

impl Scheduler {
    /// A scheduler starting due ticks on `engine`.
    pub fn new(engine: Engine) -> Self {
        Self { engine }
    }

    /// Starts every job tick due at `now` (the scheduler calls this about
    /// once a second; tests call it with their own clock). Returns the run
    /// ids it started; a tick another scheduler already started is not
    /// started again. Ticks missed while the service was down fire once, not
    /// once per missed tick.
    pub async fn run_due_jobs(&self, now: Timestamp) -> Result<Vec<String>, Error> {
        let mut started = Vec::new();
        for job in self
            .engine
            .store
            .due_jobs(now.as_millisecond(), BATCH)
            .await?
        {
            let Some(due) = job.next_run_at else {
                continue;
            };
            let input = tick_input(&job, due)?;
            let run_id = input.run_id.clone();
            let admission = Admission {
                strategy: MultitaskStrategy::Enqueue,
                whole_history: false,
            };
            let request = RunRequest {
                user: job.user_id.clone(),
                input,
                mode: Some(RuntimeMode::Automation),
                options: RunOptions::default(),
                admission,
            };
            // The tick's span (exported only): the run's trace starts here.
            let tick = tracing::info_span!(
                target: crate::telemetry::OTEL_TARGET,
                parent: None,
                "agwire.job.tick",
                otel.kind = "internal",
                agwire.job.id = %job.id,
                agwire.job.due_ms = due,
                ag_ui.thread_id = %request.input.thread_id,
                ag_ui.run_id = %run_id,
            );
            let accepted = match tracing::Instrument::instrument(self.engine.accept(request), tick)
                .await
            {
                Ok(accepted) => Some(accepted),
                Err(Error::ShuttingDown | Error::Store(StoreError::ShuttingDown)) => {
                    return Ok(started);
                }
                // A tick that can never be accepted (its thread is not the
                // job owner's, the run id was used for another request), or
                // not now (its owner is past a quota), is skipped, not
                // retried every second.
                Err(
                    error @ Error::Store(
                        StoreError::ThreadNotFound
                        | StoreError::RunIdReused { .. }
                        | StoreError::RunIdInFlight { .. }
                        | StoreError::ThreadBusy
                        | StoreError::QuotaExceeded { .. },
                    ),
                ) => {
                    tracing::warn!(job = job.id, %error, "a job's tick cannot run; skipping it");
                    None
                }
                Err(error) => {
                    tracing::error!(job = job.id, %error, "could not start a job's run");
                    continue;
                }
            };
            let schedule: Schedule = serde_json::from_str(&job.schedule)?;
            let zone = TimeZone::get(&job.timezone).unwrap_or(TimeZone::UTC);
            let from = now.max(Timestamp::from_millisecond(due).unwrap_or(now));
            let next = schedule
                .next_after(from, &zone)
                .ok()
                .map(|t| t.as_millisecond());
            // Whoever moves the job on, the run exists once: the accept
            // that created it is the one that started it.
            self.engine.store.advance_job(&job.id, due, next).await?;
            if accepted.is_some_and(|a| !a.replayed) {
                started.push(run_id);
            }
        }
        Ok(started)
    }

    /// Runs the scheduler until the service shuts down.
    pub async fn run(&self, period: std::time::Duration) {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = interval.tick() => {}
                () = self.engine.stopping() => return,
            }
            if let Err(error) = self.run_due_jobs(Timestamp::now()).await {
                tracing::error!(%error, "scheduler pass failed");
            }
        }
    }
}
