//! The webhook outbox on SQLite (see [`crate::WebhookStore`]): writes go
//! through the writer like every other, so a claim and another claim
//! never interleave.

use async_trait::async_trait;
use rusqlite::params;

use super::SqliteStore;
use crate::error::Error;
use crate::sql::{
    PRUNE_WEBHOOKS, SET_WEBHOOKS_ENABLED, WEBHOOK_DELIVERED, WEBHOOK_FAILED, WEBHOOKS_PENDING,
};
use crate::{WebhookMessage, WebhookStore};

#[async_trait]
impl WebhookStore for SqliteStore {
    async fn set_webhooks_enabled(&self, enabled: bool) -> Result<(), Error> {
        self.writer
            .call(move |tx| {
                tx.prepare_cached(SET_WEBHOOKS_ENABLED)?
                    .execute([enabled])?;
                Ok(())
            })
            .await
    }

    async fn claim_webhooks(
        &self,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<WebhookMessage>, Error> {
        self.writer
            .call(move |tx| {
                let claimed = tx
                    .prepare_cached(
                        "UPDATE webhook_outbox SET lease_until = ?1 + ?2, attempts = attempts + 1 \
                         WHERE id IN (SELECT id FROM webhook_outbox \
                           WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= ?1 \
                           AND (lease_until IS NULL OR lease_until <= ?1) \
                           ORDER BY next_attempt_at LIMIT ?3) \
                         RETURNING id, payload, attempts",
                    )?
                    .query_map(params![now_ms, lease_ms, i64::from(limit)], |r| {
                        Ok(WebhookMessage {
                            id: r.get(0)?,
                            payload: r.get(1)?,
                            attempts: r.get(2)?,
                        })
                    })?
                    .collect::<Result<_, _>>()?;
                Ok(claimed)
            })
            .await
    }

    async fn webhook_delivered(&self, id: &str, now_ms: i64) -> Result<(), Error> {
        let id = id.to_owned();
        self.writer
            .call(move |tx| {
                tx.prepare_cached(WEBHOOK_DELIVERED)?
                    .execute(params![now_ms, id])?;
                Ok(())
            })
            .await
    }

    async fn webhook_failed(
        &self,
        id: &str,
        error: &str,
        retry_at: Option<i64>,
        now_ms: i64,
    ) -> Result<(), Error> {
        let (id, error) = (id.to_owned(), error.to_owned());
        self.writer
            .call(move |tx| {
                tx.prepare_cached(WEBHOOK_FAILED)?
                    .execute(params![error, retry_at, now_ms, id])?;
                Ok(())
            })
            .await
    }

    async fn prune_webhooks(&self, before_ms: i64, limit: u32) -> Result<u64, Error> {
        self.writer
            .call(move |tx| {
                let n = tx
                    .prepare_cached(PRUNE_WEBHOOKS)?
                    .execute(params![before_ms, i64::from(limit)])?;
                Ok(n as u64)
            })
            .await
    }

    async fn webhooks_pending(&self) -> Result<u64, Error> {
        self.readers
            .read(|c| {
                let n: i64 = c
                    .prepare_cached(WEBHOOKS_PENDING)?
                    .query_row([], |r| r.get(0))?;
                Ok(u64::try_from(n).unwrap_or(0))
            })
            .await
    }
}
