//! Calendar events.

use async_trait::async_trait;

use crate::error::Error;

/// A calendar event as stored (instants in UTC, plus the zone it was
/// written in, for display).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarEvent {
    /// Its id.
    pub id: String,
    /// Its owner.
    pub user_id: String,
    /// What it is.
    pub title: String,
    /// Start (ms since the epoch).
    pub start_ms: i64,
    /// End (ms since the epoch).
    pub end_ms: i64,
    /// The IANA zone it was written in (`event_timezone`).
    pub timezone: String,
}

/// Calendar events.
#[async_trait]
pub trait CalendarStore: Send + Sync {
    /// Creates the event, or updates its owner's event with that id. False
    /// when the id belongs to another user (nothing written).
    async fn put_calendar_event(&self, event: &CalendarEvent, now_ms: i64) -> Result<bool, Error>;

    /// `user`'s event with this id.
    async fn calendar_event(&self, user: &str, id: &str) -> Result<Option<CalendarEvent>, Error>;

    /// Deletes `user`'s event; false when there was none.
    async fn delete_calendar_event(&self, user: &str, id: &str) -> Result<bool, Error>;

    /// `user`'s events overlapping `[from_ms, to_ms)`, by start (at most
    /// `limit`).
    async fn calendar_events(
        &self,
        user: &str,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<CalendarEvent>, Error>;
}
