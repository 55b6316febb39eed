//! Connections a group commit's lanes keep from one group to the next.
//!
//! Why not the pool's hand-out and hand-back per group: sqlx answers every
//! connection given back to its pool with a round trip of its own (a
//! `Sync`, to test it, in a task of its own). A lane writes group after
//! group on one connection; kept, it pays only its statements. A kept
//! connection idle for [`TESTED_AFTER_IDLE`] is tested before it is used
//! again (the server may have restarted meanwhile), as the pool's are, and
//! one a statement failed on for any reason but the server's own answer (a
//! lost connection, a protocol error) is closed, not kept.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use sqlx::pool::PoolConnection;
use sqlx::{Connection as _, PgPool, Postgres};

use super::TESTED_AFTER_IDLE;

/// The lanes' kept connections (at most one per lane: a lane takes one for
/// a group and keeps it after).
#[derive(Debug)]
pub(super) struct Kept {
    pool: PgPool,
    spare: Mutex<Vec<(PoolConnection<Postgres>, Instant)>>,
}

impl Kept {
    pub(super) fn new(pool: PgPool) -> Self {
        Self {
            pool,
            spare: Mutex::new(Vec::new()),
        }
    }

    /// A connection for one group: a kept one, or a new one from the pool.
    pub(super) async fn take(&self) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        loop {
            let spare = self
                .spare
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let Some((mut conn, since)) = spare else {
                return self.pool.acquire().await;
            };
            if since.elapsed() < TESTED_AFTER_IDLE || conn.ping().await.is_ok() {
                return Ok(conn);
            }
            conn.close_on_drop();
        }
    }

    /// Keeps `conn` for the next group, unless what the group's statement
    /// returned says the connection may be broken.
    pub(super) fn keep<T>(
        &self,
        mut conn: PoolConnection<Postgres>,
        outcome: &Result<T, sqlx::Error>,
    ) {
        match outcome {
            Ok(_) | Err(sqlx::Error::Database(_)) => self
                .spare
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((conn, Instant::now())),
            Err(_) => conn.close_on_drop(),
        }
    }
}
