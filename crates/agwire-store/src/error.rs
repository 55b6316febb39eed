//! The store's error type: what went wrong, as kinds. The sentences a client
//! reads for them are the service API's, not the store's.

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The PostgreSQL database failed.
    #[error("database: {0}")]
    Postgres(#[from] sqlx::Error),
    /// The embedded (SQLite) database failed.
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Files beside the database (attachments) could not be read or written.
    #[error("storage: {0}")]
    Io(#[from] std::io::Error),
    /// A stored value could not be (de)serialized.
    #[error("stored JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A stored event could not be read back.
    #[error("stored event: {0}")]
    Event(#[from] agwire_core::Error),
    /// The thread belongs to another user: to this one it does not exist.
    #[error("the thread belongs to another user")]
    ThreadNotFound,
    /// The attachment id is not one this service minted.
    #[error("no such attachment")]
    AttachmentNotFound,
    /// This user's `runId` was accepted before with another request (or on
    /// another thread).
    #[error("runId '{run_id}' was accepted before with another request")]
    RunIdReused {
        /// The client's run id.
        run_id: String,
    },
    /// Another request is accepting the same `runId` at this moment.
    #[error("runId '{run_id}' is being accepted by another request")]
    RunIdInFlight {
        /// The client's run id.
        run_id: String,
    },
    /// The thread already has an active run (and the run was not to wait).
    #[error("the thread has an active run")]
    ThreadBusy,
    /// Events for a run that is not running (it ended, perhaps ended by
    /// another process that found its lease expired).
    #[error("run {task_id} is not running")]
    RunNotRunning {
        /// The run.
        task_id: String,
    },
    /// A turn's tool message answers a call its thread never left pending.
    #[error("tool call {tool_call_id} is not pending in this thread")]
    ToolCallNotPending {
        /// The `toolCallId` answered.
        tool_call_id: String,
    },
    /// A turn's tool message answers a call an earlier turn answered.
    #[error("tool call {tool_call_id} was already answered")]
    ToolCallAnswered {
        /// The `toolCallId` answered.
        tool_call_id: String,
    },
    /// A turn's tool message answers a call an earlier turn went on
    /// without answering (it is closed, unanswered).
    #[error("tool call {tool_call_id} is no longer pending")]
    ToolCallClosed {
        /// The `toolCallId` answered.
        tool_call_id: String,
    },
    /// A turn's tool message answers a call that waited past its expiry
    /// (`Ending::calls_expire_at`).
    #[error("tool call {tool_call_id} expired")]
    ToolCallExpired {
        /// The `toolCallId` answered.
        tool_call_id: String,
    },
    /// The user is past one of their quotas: the run is refused (nothing
    /// written) and may be posted again this long from now.
    #[error("quota exceeded: {quota}")]
    QuotaExceeded {
        /// The quota.
        quota: crate::Quota,
        /// How long until the run would be accepted (ms; at least 1).
        retry_after_ms: i64,
    },
    /// The thread is an automation job's: it goes when the job does.
    #[error("the thread belongs to automation job {job_id}")]
    ThreadOfJob {
        /// The job.
        job_id: String,
    },
    /// A new job's thread id is already some thread's.
    #[error("the job's thread id is already in use")]
    JobThreadTaken,
    /// The store (or the service using it) is shutting down.
    #[error("shutting down")]
    ShuttingDown,
    /// A batch of run writes failed in a way that may or may not have
    /// committed: none of its calls is retried.
    #[error("could not write to the run log: {0}")]
    LogUnavailable(String),
    /// A stored row of a run's log does not hold as many events as it
    /// says (`run_events.n_events`): the numbers after it cannot be trusted.
    #[error("run {task_id}'s log is damaged at event {seq}")]
    LogCorrupt {
        /// The run.
        task_id: String,
        /// The number of the row's first event.
        seq: i64,
    },
    /// Where attachment bytes are kept apart from the database ([`Blobs`](crate::Blobs))
    /// failed, or there is none for bytes recorded as there.
    #[error("attachment bucket: {0}")]
    Blobs(String),
    /// The database cannot be used as configured (a newer schema, a
    /// migration that cannot run).
    #[error("configuration: {0}")]
    Config(String),
    /// Something that should not fail did.
    #[error("internal: {0}")]
    Internal(String),
}
