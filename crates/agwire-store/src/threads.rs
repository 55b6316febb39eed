//! Threads and their messages, as the store keeps them.

use agwire_core::Message;
use async_trait::async_trait;

use crate::error::Error;

/// A message of a thread, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Position in the thread (1, 2, ...).
    pub seq: i64,
    /// The message, as AG-UI.
    pub message: Message,
    /// When it was stored (ms since the epoch).
    pub created_at: i64,
    /// The `UiSchemaRenderer` shown under an assistant message.
    pub ui_schema: Option<serde_json::Value>,
}

/// A thread as its owner's list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRecord {
    /// Its id.
    pub thread_id: String,
    /// The title its owner gave it (`None`: its first user message names
    /// it; the service shows `derived_title` then).
    pub title: Option<String>,
    /// What its first user message calls it
    /// ([`crate::derived_title`]), stored when that message was;
    /// `None` while it has none.
    pub derived_title: Option<String>,
    /// When it was created (ms since the epoch).
    pub created_at: i64,
    /// When a run was last accepted on it.
    pub last_active_at: i64,
    /// The client run id of its active run (queued or running), if any.
    pub active_run_id: Option<String>,
    /// The automation job whose thread it is, if any.
    pub job_id: Option<String>,
}

/// A frontend tool call a thread's run left for its client to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingToolCall {
    /// The call's id (what a tool message's `toolCallId` answers).
    pub tool_call_id: String,
    /// The tool.
    pub name: String,
    /// Its argument text.
    pub arguments: String,
    /// The client run id of the run that asked.
    pub run_id: String,
    /// When the run ended (ms since the epoch).
    pub asked_at: i64,
    /// When it expires, if it does (ms since the epoch): an answer after
    /// then is [`Error::ToolCallExpired`].
    pub expires_at: Option<i64>,
}

/// What deleting a thread removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeletedThread {
    /// Its runs (their event logs with them).
    pub runs: u64,
    /// Its messages.
    pub messages: u64,
    /// The attachments its messages referred to that no other thread of its
    /// owner does (records and bytes).
    pub attachments: Vec<String>,
}

/// Threads and their messages (written by [`RunStore`](crate::RunStore): accepting, claiming
/// and ending runs).
#[async_trait]
pub trait ThreadStore: Send + Sync {
    /// `user`'s threads, most recently active first (then by id, descending),
    /// strictly after `after` (a `(last_active_at, thread_id)` of the
    /// previous page) — at most `limit`.
    async fn threads(
        &self,
        user: &str,
        after: Option<(i64, &str)>,
        limit: u32,
    ) -> Result<Vec<ThreadRecord>, Error>;

    /// `user`'s thread with this id.
    async fn thread(&self, user: &str, thread_id: &str) -> Result<Option<ThreadRecord>, Error>;

    /// Sets (`Some`) or clears `user`'s own title of a thread; false when
    /// `user` has no such thread.
    async fn set_thread_title(
        &self,
        user: &str,
        thread_id: &str,
        title: Option<&str>,
    ) -> Result<bool, Error>;

    /// The frontend tool calls of a thread still waiting for an answer,
    /// oldest first. A call is pending from the end of the run that made it
    /// until the next turn accepted on its thread, which answers it or goes
    /// on without it (see [`RunStore::accept_run`](crate::RunStore::accept_run)),
    /// or until it expires: one past its expiry at `now_ms` is not listed.
    async fn pending_tool_calls(
        &self,
        thread_id: &str,
        now_ms: i64,
    ) -> Result<Vec<PendingToolCall>, Error>;

    /// The sweep: marks every pending tool call past its expiry at `now_ms`
    /// expired, for good; returns how many. (Rules and reads already treat
    /// a call past its expiry as expired; the sweep records it.)
    async fn expire_tool_calls(&self, now_ms: i64) -> Result<u64, Error>;

    /// Deletes `user`'s thread with everything of it — runs, event logs,
    /// messages, tool calls, and the attachments its messages refer to that
    /// no other thread of `user`'s does — in one transaction, or nothing:
    /// [`Error::ThreadNotFound`] (not `user`'s), [`Error::ThreadOfJob`] (an
    /// automation job's), [`Error::ThreadBusy`] (a run is active: cancel it
    /// first). Other users' data is never touched.
    async fn delete_thread(&self, user: &str, thread_id: &str) -> Result<DeletedThread, Error>;

    /// Who owns a thread.
    async fn thread_owner(&self, thread_id: &str) -> Result<Option<String>, Error>;

    /// `user`'s most recently active thread.
    async fn latest_thread(&self, user: &str) -> Result<Option<String>, Error>;

    /// When the latest message of a thread that history shows (a user
    /// message, an assistant message with text or a UI) stored strictly
    /// before `before_ms` was stored, if there is one. Indexed: the cost
    /// does not grow with the thread.
    async fn last_shown_before(
        &self,
        thread_id: &str,
        before_ms: i64,
    ) -> Result<Option<i64>, Error>;

    /// The messages of a thread that history shows, stored in
    /// `[from_ms, to_ms)`, in thread order. Indexed, as above.
    async fn shown_messages(
        &self,
        thread_id: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredMessage>, Error>;

    /// A thread's messages of the given roles, in thread order (the whole
    /// thread: for tools and tests, never for a request).
    async fn thread_messages(
        &self,
        thread_id: &str,
        roles: &[&str],
    ) -> Result<Vec<StoredMessage>, Error>;

    /// The bodies (AG-UI message JSON) of a thread's latest `limit` messages
    /// of [`HISTORY_ROLES`](crate::HISTORY_ROLES), oldest first: what a run's agent is given.
    async fn recent_messages(&self, thread_id: &str, limit: u32) -> Result<Vec<String>, Error>;

    /// [`Self::recent_messages`] and `user`'s settings (JSON text, `None`
    /// when never set) in one read, for a store where every read is a round
    /// trip to a server (PostgreSQL: what a run starting there reads before
    /// its agent runs); `None` from a store that reads them apart.
    async fn recent_messages_and_settings(
        &self,
        _user: &str,
        _thread_id: &str,
        _limit: u32,
    ) -> Result<Option<(Option<String>, Vec<String>)>, Error> {
        Ok(None)
    }
}
