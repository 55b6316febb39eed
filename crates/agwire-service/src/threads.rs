//! Threads as their owner manages them — the threads feature's home: what
//! the list calls each one, the titles an owner may give, the list's
//! cursor, and the engine's thread operations (list a page, read, rename,
//! the tool calls a thread waits on, and deleting a thread with everything
//! of it, its active runs cancelled first), each reaching only the user's
//! own threads. The store keeps the rows ([`crate::store::ThreadStore`]);
//! the HTTP layer is `api/threads.rs`.

use std::time::Duration;

use futures_util::StreamExt;

use crate::engine::Engine;
use crate::error::Error;
use crate::error::StoreError;
use crate::store::DeletedThread;
pub use crate::store::{DERIVED_TITLE_CHARS, derived_title};
pub use crate::store::{PendingToolCall, ThreadRecord};

/// Most characters of a title an owner gives.
pub const MAX_TITLE_CHARS: usize = 200;
/// Threads a page of the list holds, unless asked otherwise.
pub const DEFAULT_PAGE: u32 = 30;
/// Most threads a page of the list holds.
pub const MAX_PAGE: u32 = 100;
/// How long a delete waits for the thread's cancelled runs to end (a run
/// stops at its next event; a model call in flight is abandoned).
const CANCEL_WAIT: Duration = Duration::from_secs(30);
/// Runs of a thread a delete looks through for active ones (they are the
/// newest: a thread runs one at a time and queues the rest behind it).
const ACTIVE_SCAN: u32 = 100;

/// What a thread is called: its owner's title, else the first line of its
/// first user message (stored with the thread when that message was), else
/// nothing (a thread whose first turn was only images, or that has none
/// yet).
pub fn title(thread: &ThreadRecord) -> String {
    thread
        .title
        .clone()
        .or_else(|| thread.derived_title.clone())
        .unwrap_or_default()
}

/// Why a title an owner gives is refused (the sentence a client reads).
pub fn check_title(title: &str) -> Result<&str, String> {
    let title = title.trim();
    if title.is_empty() || title.chars().count() > MAX_TITLE_CHARS {
        return Err(format!("title must be 1 to {MAX_TITLE_CHARS} characters"));
    }
    if title.chars().any(char::is_control) {
        return Err("title must be one line (no line breaks or control characters)".into());
    }
    Ok(title)
}

/// The cursor of the page after `thread`: its last activity and id,
/// opaque to clients (`{ms}.{id}`).
pub fn cursor_after(thread: &ThreadRecord) -> String {
    format!("{}.{}", thread.last_active_at, thread.thread_id)
}

/// A cursor [`cursor_after`] made, read back; `None` when it is not one.
pub fn parse_cursor(cursor: &str) -> Option<(i64, &str)> {
    let (ms, id) = cursor.split_once('.')?;
    let id = (!id.is_empty() && id.len() <= 128).then_some(id)?;
    Some((ms.parse().ok()?, id))
}

/// A page of a user's threads, most recently active first.
#[derive(Debug)]
pub struct ThreadPage {
    /// At most the page's limit.
    pub threads: Vec<ThreadRecord>,
    /// The next page's cursor ([`cursor_after`] its last thread); `None` on
    /// the last page.
    pub next_cursor: Option<String>,
}

impl Engine {
    /// A page of `user`'s threads: at most `limit` after the cursor
    /// `after` ([`parse_cursor`]).
    pub(crate) async fn thread_page(
        &self,
        user: &str,
        after: Option<(i64, &str)>,
        limit: u32,
    ) -> Result<ThreadPage, Error> {
        // One more than the page tells whether another page follows.
        let mut threads = self.store.threads(user, after, limit + 1).await?;
        let more = threads.len() > limit as usize;
        threads.truncate(limit as usize);
        Ok(ThreadPage {
            next_cursor: threads.last().filter(|_| more).map(cursor_after),
            threads,
        })
    }

    /// `user`'s thread `thread_id` (`None`: no such thread of theirs).
    pub(crate) async fn thread(
        &self,
        user: &str,
        thread_id: &str,
    ) -> Result<Option<ThreadRecord>, Error> {
        Ok(self.store.thread(user, thread_id).await?)
    }

    /// The frontend tool calls `thread` waits on, oldest first (a record
    /// [`Self::thread`] read: its owner's); expired ones are not.
    pub(crate) async fn pending_tool_calls(
        &self,
        thread: &ThreadRecord,
    ) -> Result<Vec<PendingToolCall>, Error> {
        Ok(self
            .store
            .pending_tool_calls(&thread.thread_id, crate::engine::now_ms())
            .await?)
    }

    /// Sets (`Some`, checked by [`check_title`]) or clears `user`'s title of
    /// their thread; `false` when they have no such thread.
    pub(crate) async fn rename_thread(
        &self,
        user: &str,
        thread_id: &str,
        title: Option<&str>,
    ) -> Result<bool, Error> {
        Ok(self.store.set_thread_title(user, thread_id, title).await?)
    }

    /// Deletes `user`'s thread (see [`crate::store::ThreadStore::delete_thread`]):
    /// its active runs are cancelled and waited for first, so their
    /// followers see them end before the thread goes. A run accepted on it
    /// meanwhile is cancelled in turn (a few rounds, then
    /// [`StoreError::ThreadBusy`]).
    pub async fn delete_thread(&self, user: &str, thread_id: &str) -> Result<DeletedThread, Error> {
        if self.store.thread_owner(thread_id).await?.as_deref() != Some(user) {
            return Err(StoreError::ThreadNotFound.into());
        }
        for _ in 0..3 {
            let active: Vec<_> = self
                .store
                .thread_runs(thread_id, ACTIVE_SCAN)
                .await?
                .into_iter()
                .filter(|run| run.status.is_active() && run.user_id == user)
                .collect();
            for run in &active {
                self.cancel(run).await?;
            }
            for run in &active {
                let ended = self.follow(run.task_id.clone(), 0).for_each(|_| async {});
                if tokio::time::timeout(CANCEL_WAIT, ended).await.is_err() {
                    tracing::warn!(run_id = %run.run_id, "a cancelled run did not end in time; the thread stays");
                    return Err(StoreError::ThreadBusy.into());
                }
            }
            match self.store.delete_thread(user, thread_id).await {
                Err(StoreError::ThreadBusy) => {}
                deleted => return Ok(deleted?),
            }
        }
        Err(StoreError::ThreadBusy.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(first: Option<&str>, own: Option<&str>) -> ThreadRecord {
        ThreadRecord {
            thread_id: "t".into(),
            title: own.map(str::to_owned),
            derived_title: first.map(|text| {
                let message = serde_json::from_value(
                    serde_json::json!({"id": "u", "role": "user", "content": text}),
                )
                .unwrap();
                let agwire_core::Message::User(user) = message else {
                    unreachable!()
                };
                derived_title(&user)
            }),
            created_at: 0,
            last_active_at: 0,
            active_run_id: None,
            job_id: None,
        }
    }

    #[test]
    fn a_title_is_the_owners_or_the_first_line_cut() {
        assert_eq!(title(&thread(Some("hi"), Some("Mine"))), "Mine");
        assert_eq!(
            title(&thread(Some("\n  Plan the trip \nmore"), None)),
            "Plan the trip"
        );
        assert_eq!(title(&thread(None, None)), "");
        let long = "word ".repeat(40);
        let cut = title(&thread(Some(&long), None));
        assert!(cut.ends_with('…'), "{cut}");
        assert_eq!(cut.chars().count(), DERIVED_TITLE_CHARS); // "word" x16 less the space, then …
        let han = "日".repeat(100);
        assert_eq!(
            title(&thread(Some(&han), None)).chars().count(),
            DERIVED_TITLE_CHARS + 1
        );
    }

    #[test]
    fn titles_given_are_one_line_of_1_to_200_characters() {
        assert_eq!(check_title("  Trip  "), Ok("Trip"));
        assert!(check_title("   ").is_err());
        assert!(check_title(&"x".repeat(201)).is_err());
        assert!(check_title(&"字".repeat(200)).is_ok());
        assert!(check_title("a\nb").is_err());
    }

    #[test]
    fn a_cursor_reads_back() {
        let mut t = thread(None, None);
        t.last_active_at = 1_700_000_000_123;
        t.thread_id = "550e8400-e29b-41d4-a716-446655440000".into();
        assert_eq!(
            parse_cursor(&cursor_after(&t)),
            Some((1_700_000_000_123, "550e8400-e29b-41d4-a716-446655440000"))
        );
        assert_eq!(parse_cursor("x.y"), None);
        assert_eq!(parse_cursor("12"), None);
        assert_eq!(parse_cursor("12."), None);
    }
}
