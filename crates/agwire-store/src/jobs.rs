//! Automation jobs.

use async_trait::async_trait;

use crate::error::Error;

/// An automation job as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// Its id.
    pub id: String,
    /// Its owner.
    pub user_id: String,
    /// Its name.
    pub name: String,
    /// The schedule (JSON: `{"cron": ...}` or `{"every_seconds": n}`).
    pub schedule: String,
    /// The IANA zone the schedule is read in.
    pub timezone: String,
    /// What each run asks.
    pub prompt: String,
    /// The runtime config (JSON: the service's job runtime, agents and tools).
    pub config: String,
    /// Whether it fires.
    pub enabled: bool,
    /// The thread its runs go to (its owner's, created with the job).
    pub thread_id: String,
    /// The next tick (ms), when enabled.
    pub next_run_at: Option<i64>,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

/// Automation jobs.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Creates a job and its thread, owned by the job's owner, in one
    /// transaction: no other user can ever post to (or take) that thread. A
    /// thread id already in use is [`Error::JobThreadTaken`] (nothing is written).
    async fn create_job(&self, job: &JobRecord) -> Result<(), Error>;

    /// Replaces a job's fields (its owner and thread never change: a job of
    /// another user with this id is left alone and false returned).
    async fn update_job(&self, job: &JobRecord) -> Result<bool, Error>;

    /// `user`'s job.
    async fn job(&self, user: &str, id: &str) -> Result<Option<JobRecord>, Error>;

    /// `user`'s job whose runs go to `thread_id`.
    async fn job_of_thread(&self, user: &str, thread_id: &str) -> Result<Option<JobRecord>, Error>;

    /// `user`'s jobs, oldest first.
    async fn jobs(&self, user: &str) -> Result<Vec<JobRecord>, Error>;

    /// Deletes `user`'s job (its runs and thread stay); false if none.
    async fn delete_job(&self, user: &str, id: &str) -> Result<bool, Error>;

    /// Enabled jobs whose next tick is at or before `now_ms`, earliest first.
    async fn due_jobs(&self, now_ms: i64, limit: u32) -> Result<Vec<JobRecord>, Error>;

    /// Moves a job from tick `due` to `next` (compare-and-set); false when
    /// another scheduler, or a change to the job, got there first.
    async fn advance_job(&self, id: &str, due: i64, next: Option<i64>) -> Result<bool, Error>;
}
