//! The Standard Webhooks outbox: one message for each run that reaches a
//! final status, written in the transaction that ends it (a database
//! trigger, so every way a run ends is covered) while webhooks are enabled,
//! and delivered at least once by whichever process claims it — a claim
//! is a lease, so a process that dies mid-delivery leaves the message to
//! another once the lease runs out.

use async_trait::async_trait;

use crate::error::Error;

/// A message taken for delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookMessage {
    /// Its `webhook-id` (`msg_<task id>`), the same on every attempt.
    pub id: String,
    /// Its body: `{"type": "run.<status>", "timestamp", "data": {…}}`.
    pub payload: String,
    /// Attempts so far, this one included.
    pub attempts: u32,
}

/// The outbox.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Whether the end of a run writes a message (every process sharing the
    /// database should say the same).
    async fn set_webhooks_enabled(&self, enabled: bool) -> Result<(), Error>;

    /// Takes up to `limit` messages due at `now_ms` (not delivered, not
    /// given up, next attempt due, not leased to another process), oldest
    /// due first, each leased for `lease_ms` and its attempt counted. Two
    /// processes never hold one message at once.
    async fn claim_webhooks(
        &self,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<WebhookMessage>, Error>;

    /// The message was delivered (the receiver answered 2xx).
    async fn webhook_delivered(&self, id: &str, now_ms: i64) -> Result<(), Error>;

    /// The attempt failed with `error`: tried again at `retry_at`, or, with
    /// `None`, given up for good.
    async fn webhook_failed(
        &self,
        id: &str,
        error: &str,
        retry_at: Option<i64>,
        now_ms: i64,
    ) -> Result<(), Error>;

    /// Deletes up to `limit` messages done with (delivered, or given up)
    /// before `before_ms`; how many went.
    async fn prune_webhooks(&self, before_ms: i64, limit: u32) -> Result<u64, Error>;

    /// Messages still to deliver (not delivered, not given up).
    async fn webhooks_pending(&self) -> Result<u64, Error>;
}
