//! The readers: a few connections of their own (WAL: a reader never waits
//! for the writer, nor it for them), each read run on tokio's blocking
//! threads with one of them.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::Connection;
use tokio::sync::Semaphore;

use super::connection::{self, Role};
use crate::error::Error;

/// How many reads run at once (a connection each).
const READERS: usize = 4;

/// The readers' pool; clones share it.
#[derive(Debug, Clone)]
pub(super) struct Readers {
    pool: Arc<Pool>,
    /// One permit per idle connection: a read waits here, not on a thread.
    permits: Arc<Semaphore>,
}

#[derive(Debug)]
struct Pool {
    idle: Mutex<Vec<Connection>>,
}

/// A connection taken from the pool, given back when dropped (a read that
/// panicked included).
struct Lease<'a> {
    pool: &'a Pool,
    connection: Option<Connection>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(connection);
        }
    }
}

impl Readers {
    /// Opens the readers' connections (the database exists and is
    /// migrated).
    pub(super) fn open(path: &Path) -> Result<Self, Error> {
        let idle = (0..READERS)
            .map(|_| connection::open(path, Role::Read))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            pool: Arc::new(Pool {
                idle: Mutex::new(idle),
            }),
            permits: Arc::new(Semaphore::new(READERS)),
        })
    }

    /// Runs `read` on an idle connection (waiting for one), on a blocking
    /// thread.
    pub(super) async fn read<T, F>(&self, read: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
    {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::ShuttingDown)?;
        let pool = self.pool.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let lease = Lease {
                pool: &pool,
                connection: pool
                    .idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pop(),
            };
            // (A permit is an idle connection: there is one.)
            let connection = lease
                .connection
                .as_ref()
                .ok_or_else(|| Error::Internal("no idle SQLite reader".into()))?;
            read(connection)
        })
        .await
        .map_err(|e| Error::Internal(format!("a read failed: {e}")))?
    }
}
