//! Day-scoped history snapshots (the agent-run API's `HistorySnapshotResponse`).
//!
//! A day is a calendar day in the user's time zone. The snapshot shows the
//! latest day strictly before `before` (or the latest day at all) that has
//! user or assistant messages, those messages in thread order, and whether
//! earlier days have any. Tool messages are stored for the runtime and never
//! shown. This module reads the day ([`Engine::history_day`]); the API
//! renders it as the snapshot (`api/history`).

use jiff::civil::Date;
use jiff::tz::TimeZone;

use crate::engine::Engine;
use crate::error::Error;
use crate::error::StoreError;
pub(crate) use crate::store::StoredMessage;

/// What a snapshot reads of a thread: its shown messages, by when they
/// were stored — one day's worth at a time, never the whole thread (the
/// store answers both from an index).
#[async_trait::async_trait]
pub(crate) trait ShownMessages: Sync {
    /// When the latest shown message stored strictly before `before_ms`
    /// was stored, if one was.
    async fn last_shown_before(&self, before_ms: i64) -> Result<Option<i64>, Error>;

    /// The shown messages stored in `[from_ms, to_ms)`, in thread order.
    async fn shown_between(&self, from_ms: i64, to_ms: i64) -> Result<Vec<StoredMessage>, Error>;
}

/// A thread of a store, as [`ShownMessages`].
struct StoredThread<'a> {
    store: &'a dyn crate::store::Store,
    thread_id: &'a str,
}

#[async_trait::async_trait]
impl ShownMessages for StoredThread<'_> {
    async fn last_shown_before(&self, before_ms: i64) -> Result<Option<i64>, Error> {
        Ok(self
            .store
            .last_shown_before(self.thread_id, before_ms)
            .await?)
    }

    async fn shown_between(&self, from_ms: i64, to_ms: i64) -> Result<Vec<StoredMessage>, Error> {
        Ok(self
            .store
            .shown_messages(self.thread_id, from_ms, to_ms)
            .await?)
    }
}

/// When `day` starts in `tz` (ms since the epoch): `None` past the last
/// instant a timestamp can hold, `Some(i64::MIN)` before the first.
fn start_of(day: Date, tz: &TimeZone) -> Option<i64> {
    match day.to_zoned(tz.clone()) {
        Ok(start) => Some(start.timestamp().as_millisecond()),
        Err(_) if day.year() > 0 => None,
        Err(_) => Some(i64::MIN),
    }
}

/// A day of a thread that history shows (the default: no day).
#[derive(Debug, Default)]
pub(crate) struct ShownDay {
    /// The day (in the user's zone); `None` when no day has shown messages.
    pub(crate) day: Option<Date>,
    /// Whether an earlier day has shown messages.
    pub(crate) has_more: bool,
    /// The day's shown messages, in thread order.
    pub(crate) messages: Vec<StoredMessage>,
}

/// The day a snapshot shows, read from `thread`: the latest day in `tz`
/// strictly before `before` with a shown message, its shown messages, and
/// whether an earlier day has any. Three indexed reads, whatever the
/// thread's length.
pub(crate) async fn read_day(
    thread: &dyn ShownMessages,
    tz: &TimeZone,
    before: Option<Date>,
) -> Result<ShownDay, Error> {
    let bound = before.and_then(|b| start_of(b, tz)).unwrap_or(i64::MAX);
    let Some(last) = thread.last_shown_before(bound).await? else {
        return Ok(ShownDay::default());
    };
    let Ok(at) = jiff::Timestamp::from_millisecond(last) else {
        return Ok(ShownDay::default());
    };
    let day = at.to_zoned(tz.clone()).date();
    let start = start_of(day, tz).unwrap_or(i64::MIN);
    let end = day
        .tomorrow()
        .ok()
        .and_then(|next| start_of(next, tz))
        .unwrap_or(i64::MAX)
        .min(bound);
    let messages = thread.shown_between(start, end).await?;
    let has_more = thread.last_shown_before(start).await?.is_some();
    Ok(ShownDay {
        day: Some(day),
        has_more,
        messages,
    })
}

impl Engine {
    /// The day of `user`'s thread `thread_id` (their most recently active
    /// thread when `None`) that history shows before `before` (see
    /// [`read_day`]), in their time zone, with the thread's id (`None`: they
    /// have no thread). Another user's thread is [`Error::ThreadNotFound`].
    pub(crate) async fn history_day(
        &self,
        user: &str,
        thread_id: Option<&str>,
        before: Option<Date>,
    ) -> Result<(Option<String>, ShownDay), Error> {
        let thread_id = match thread_id {
            Some(thread_id) => match self.store.thread_owner(thread_id).await? {
                Some(owner) if owner == user => Some(thread_id.to_owned()),
                _ => return Err(StoreError::ThreadNotFound.into()),
            },
            None => self.store.latest_thread(user).await?,
        };
        let Some(id) = &thread_id else {
            return Ok((None, ShownDay::default()));
        };
        let tz = self.time_zone(user).await?;
        // One day of the thread, read by index: never the whole thread.
        let thread = StoredThread {
            store: &*self.store,
            thread_id: id,
        };
        let day = read_day(&thread, &tz, before).await?;
        Ok((thread_id, day))
    }
}
