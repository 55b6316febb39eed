//! A user's calendar, as the calendar API lists it (the calendar tools
//! write it: [`crate::brain::tools`]).

use super::Engine;
use crate::error::Error;
use crate::store::CalendarEvent;

impl Engine {
    /// `user`'s events overlapping `[from_ms, to_ms)`, by start (at most
    /// `limit`).
    pub(crate) async fn calendar_events(
        &self,
        user: &str,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<CalendarEvent>, Error> {
        Ok(self
            .store
            .calendar_events(user, from_ms, to_ms, limit)
            .await?)
    }
}
