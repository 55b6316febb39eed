//! The webhook outbox on PostgreSQL (see [`crate::WebhookStore`]): claims
//! skip the rows another replica holds locked, and a lease keeps a message
//! from a second replica until it runs out.

use async_trait::async_trait;
use sqlx::Row;

use super::PgStore;
use crate::error::Error;
use crate::sql::{PRUNE_WEBHOOKS, SET_WEBHOOKS_ENABLED, WEBHOOK_DELIVERED, WEBHOOKS_PENDING};
use crate::{WebhookMessage, WebhookStore};

#[async_trait]
impl WebhookStore for PgStore {
    async fn set_webhooks_enabled(&self, enabled: bool) -> Result<(), Error> {
        sqlx::query(SET_WEBHOOKS_ENABLED)
            .bind(enabled)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn claim_webhooks(
        &self,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<WebhookMessage>, Error> {
        let rows = sqlx::query(
            "UPDATE webhook_outbox SET lease_until = $1 + $2, attempts = attempts + 1 \
             WHERE id IN (SELECT id FROM webhook_outbox \
               WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= $1 \
               AND (lease_until IS NULL OR lease_until <= $1) \
               ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED) \
             RETURNING id, payload, attempts",
        )
        .bind(now_ms)
        .bind(lease_ms)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(WebhookMessage {
                    id: row.try_get("id")?,
                    payload: row.try_get("payload")?,
                    attempts: u32::try_from(row.try_get::<i32, _>("attempts")?).unwrap_or(0),
                })
            })
            .collect()
    }

    async fn webhook_delivered(&self, id: &str, now_ms: i64) -> Result<(), Error> {
        sqlx::query(WEBHOOK_DELIVERED)
            .bind(now_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn webhook_failed(
        &self,
        id: &str,
        error: &str,
        retry_at: Option<i64>,
        now_ms: i64,
    ) -> Result<(), Error> {
        sqlx::query(
            "UPDATE webhook_outbox \
             SET lease_until = NULL, last_error = $2, next_attempt_at = COALESCE($3::BIGINT, next_attempt_at), \
             gave_up_at = CASE WHEN $3::BIGINT IS NULL THEN $4 END WHERE id = $1",
        )
        .bind(id)
        .bind(error)
        .bind(retry_at)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn prune_webhooks(&self, before_ms: i64, limit: u32) -> Result<u64, Error> {
        let done = sqlx::query(PRUNE_WEBHOOKS)
            .bind(before_ms)
            .bind(i64::from(limit))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn webhooks_pending(&self) -> Result<u64, Error> {
        let n: i64 = sqlx::query_scalar(WEBHOOKS_PENDING)
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
