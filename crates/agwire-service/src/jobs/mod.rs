//! Automation jobs: their rules (fields, schedules, the next tick) and the
//! scheduler that starts due ticks as `runtime_mode: automation` runs on the
//! job's own thread. (`api::jobs` serves them over HTTP.)
//!
//! Each tick runs at most once — across restarts and replicas — because
//! the tick's run id is derived from the job and the tick
//! (`job-{id}-{tick ms}`): the scheduler first accepts that run (a second
//! accept of the same id and body is the idempotent re-post), then moves the
//! job to its next tick with a compare-and-set on the tick it fired. A crash
//! between the two repeats the accept, which changes nothing.

pub(crate) mod schedule;
mod scheduler;

pub use scheduler::Scheduler;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Map, Value, json};

use crate::brain::agents::{JobRuntime, RuntimeConfig};
use crate::engine::{Engine, RunRecord};
use crate::error::Error;
use crate::jobs::schedule::Schedule;
pub(crate) use crate::store::JobRecord;

/// Longest job name and prompt.
const MAX_NAME: usize = 200;
const MAX_PROMPT: usize = 10_000;
/// Jobs one user may have.
pub(crate) const MAX_JOBS_PER_USER: usize = 100;

/// A new job of `user`'s, before its fields are applied: enabled, with
/// the default config and a thread of its own (created with it).
pub(crate) fn new_job(user: String, now: Timestamp) -> JobRecord {
    JobRecord {
        id: uuid::Uuid::now_v7().to_string(),
        user_id: user,
        name: String::new(),
        schedule: String::new(),
        timezone: String::new(),
        prompt: String::new(),
        config: "{}".into(),
        enabled: true,
        thread_id: uuid::Uuid::new_v4().to_string(),
        next_run_at: None,
        created_at: now.as_millisecond(),
        updated_at: now.as_millisecond(),
    }
}

/// Applies the fields of `patch` to `job` (all fields when creating),
/// checking each; recomputes the next tick.
pub(crate) fn apply(
    runtime: &RuntimeConfig,
    job: &mut JobRecord,
    patch: &Map<String, Value>,
    now: Timestamp,
) -> Result<(), String> {
    const FIELDS: [&str; 6] = [
        "name", "schedule", "timezone", "prompt", "config", "enabled",
    ];
    if let Some(key) = patch.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!("unknown job field '{key}'"));
    }
    if let Some(name) = patch.get("name") {
        match name.as_str().map(str::trim) {
            Some(n) if !n.is_empty() && n.chars().count() <= MAX_NAME => {
                n.clone_into(&mut job.name);
            }
            _ => return Err("name must be 1 to 200 characters".to_owned()),
        }
    }
    if let Some(prompt) = patch.get("prompt") {
        match prompt.as_str() {
            Some(p) if !p.trim().is_empty() && p.chars().count() <= MAX_PROMPT => {
                p.clone_into(&mut job.prompt);
            }
            _ => return Err("prompt must be 1 to 10000 characters".to_owned()),
        }
    }
    if let Some(zone) = patch.get("timezone") {
        match zone.as_str().filter(|z| TimeZone::get(z).is_ok()) {
            Some(z) => z.clone_into(&mut job.timezone),
            None => return Err("timezone must be an IANA time zone".to_owned()),
        }
    }
    if let Some(schedule) = patch.get("schedule") {
        let parsed: Schedule = serde_json::from_value(schedule.clone()).map_err(|_| {
            "schedule must be {\"cron\": \"m h dom mon dow\"} or {\"every_seconds\": n}".to_owned()
        })?;
        parsed
            .check()
            .map_err(|e| format!("invalid schedule: {e}"))?;
        job.schedule = serde_json::to_string(&parsed).unwrap_or_default();
    }
    if let Some(config) = patch.get("config") {
        let parsed: JobRuntime =
            serde_json::from_value(config.clone()).map_err(|e| format!("invalid config: {e}"))?;
        runtime
            .for_job(&parsed)
            .map_err(|e| format!("invalid config: {e}"))?;
        job.config = serde_json::to_string(&parsed).unwrap_or_default();
    }
    if let Some(enabled) = patch.get("enabled") {
        job.enabled = enabled
            .as_bool()
            .ok_or_else(|| "enabled must be a boolean".to_owned())?;
    }
    job.next_run_at = if job.enabled {
        let schedule: Schedule =
            serde_json::from_str(&job.schedule).map_err(|_| "schedule is required".to_owned())?;
        let zone = TimeZone::get(&job.timezone).unwrap_or(TimeZone::UTC);
        let next = schedule
            .next_after(now, &zone)
            .map_err(|e| format!("invalid schedule: {e}"))?;
        Some(next.as_millisecond())
    } else {
        None
    };
    job.updated_at = now.as_millisecond();
    Ok(())
}

/// The run a job's tick starts (the same bytes every time for one tick, so
/// a repeated accept is the idempotent re-post).
pub(crate) fn tick_input(
    job: &JobRecord,
    due_ms: i64,
) -> Result<agwire_core::RunAgentInput, Error> {
    let run_id = format!("job-{}-{due_ms}", job.id);
    let input = json!({
        "threadId": job.thread_id,
        "runId": run_id,
        "state": {},
        "messages": [{"id": format!("{run_id}-u"), "role": "user", "content": job.prompt}],
        "tools": [],
        "context": [],
        "forwardedProps": {"runtime_mode": "automation"},
    });
    Ok(serde_json::from_value(input)?)
}

/// A user's jobs, as the API manages them: each operation reaches only the
/// user's own jobs.
impl Engine {
    /// `user`'s jobs.
    pub(crate) async fn jobs(&self, user: &str) -> Result<Vec<JobRecord>, Error> {
        Ok(self.store.jobs(user).await?)
    }

    /// `user`'s job `id` (`None`: no such job of theirs).
    pub(crate) async fn job(&self, user: &str, id: &str) -> Result<Option<JobRecord>, Error> {
        Ok(self.store.job(user, id).await?)
    }

    /// Stores a new job and creates its thread, owned by its user.
    pub(crate) async fn create_job(&self, job: &JobRecord) -> Result<(), Error> {
        Ok(self.store.create_job(job).await?)
    }

    /// Stores a job's changed fields; `false` when it was deleted since it
    /// was read.
    pub(crate) async fn update_job(&self, job: &JobRecord) -> Result<bool, Error> {
        Ok(self.store.update_job(job).await?)
    }

    /// Deletes `user`'s job `id` (its runs and thread stay); `false` when
    /// they have no such job.
    pub(crate) async fn delete_job(&self, user: &str, id: &str) -> Result<bool, Error> {
        Ok(self.store.delete_job(user, id).await?)
    }

    /// A job's latest `limit` runs, newest first.
    pub(crate) async fn job_runs(
        &self,
        job: &JobRecord,
        limit: u32,
    ) -> Result<Vec<RunRecord>, Error> {
        Ok(self.store.thread_runs(&job.thread_id, limit).await?)
    }
}
