#![doc = include_str!("../README.md")]

mod attachments;
mod blobs;
mod calendar;
mod error;
mod group;
mod jobs;
mod log;
mod postgres;
mod profiles;
mod quotas;
mod rules;
mod run;
mod runs;
mod sql;
mod sqlite;
mod threads;
mod webhooks;

use std::fmt;

pub use attachments::{AttachmentRecord, AttachmentStore};
pub use blobs::Blobs;
pub use calendar::{CalendarEvent, CalendarStore};
pub use error::Error;
pub use jobs::{JobRecord, JobStore};
pub use postgres::PgStore;
pub use profiles::ProfileStore;
pub use quotas::{DAY_MS, Quota, Quotas, RUN_WINDOW_MS, Usage, day_ends, run_tokens, utc_day};
pub use rules::{
    DERIVED_TITLE_CHARS, REFERENCE_PREFIX, derived_title, image_references, is_attachment_id, shown,
};
pub use run::{
    Admission, ClientTime, ClientTimeField, MultitaskStrategy, RunOptions, RunStatus, RuntimeMode,
};
pub use runs::{
    Accepted, Briefing, Change, Claimed, Ending, HISTORY_ROLES, HISTORY_WINDOW, NewRun, OnClaim,
    RunRecord, RunStore, StartHere, Stopped, cancelled_log, run_started,
};
pub use sqlite::SqliteStore;
pub use threads::{DeletedThread, PendingToolCall, StoredMessage, ThreadRecord, ThreadStore};
pub use webhooks::{WebhookMessage, WebhookStore};

/// Everything the service keeps.
pub trait Store:
    RunStore
    + ThreadStore
    + ProfileStore
    + AttachmentStore
    + CalendarStore
    + JobStore
    + WebhookStore
    + fmt::Debug
{
}

impl<T> Store for T where
    T: RunStore
        + ThreadStore
        + ProfileStore
        + AttachmentStore
        + CalendarStore
        + JobStore
        + WebhookStore
        + fmt::Debug
{
}
