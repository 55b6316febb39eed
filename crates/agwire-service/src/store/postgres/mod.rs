//! The shared backend: PostgreSQL, for several `agwire serve` replicas on
//! one database.
//!
//! Every rule the traits state holds across processes, by row locks rather
//! than by one writer:
//! - accepting on a thread locks the thread's row (`FOR UPDATE`), so two
//!   accepts on one idle thread are serialized and the second sees the
//!   first's run; a thread's messages are numbered under the same lock;
//! - a claim takes `FOR UPDATE SKIP LOCKED` the oldest active run of each
//!   thread that is still queued, so two replicas never claim one run, and
//!   a claim and a cancel of one queued run exclude each other (whichever
//!   locks the row first wins; the other sees it is no longer queued);
//! - a run's events are numbered under its row's lock;
//! - a job's tick moves by compare-and-set on the tick it fired.
//!
//! Migrations are sqlx's (`migrations/postgres/`), run at connect under
//! sqlx's advisory lock, so replicas starting together migrate once.

mod records;
mod runs;

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::error::Error;

/// The schema, versioned.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// A PostgreSQL database shared by any number of replicas.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host/db`) and migrates the schema
    /// (or refuses one newer than this binary).
    pub async fn connect(url: &str) -> Result<Self, Error> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(|error| {
                Error::Config(format!(
                    "cannot reach the PostgreSQL database at {}: {error}",
                    redacted(url)
                ))
            })?;
        MIGRATOR.run(&pool).await.map_err(|error| match error {
            sqlx::migrate::MigrateError::VersionMissing(version) => Error::Config(format!(
                "the database's schema (migration {version}) is newer than this binary's: upgrade agwire"
            )),
            other => Error::Config(format!("cannot migrate the PostgreSQL database: {other}")),
        })?;
        Ok(Self { pool })
    }
}

/// A database URL without its password (for messages).
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// Sequence numbers are `BIGINT`; ours are `u64` (never near either limit).
fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            super::redacted("postgres://me:secret@db.example:5432/agwire"),
            "postgres://me@db.example:5432/agwire"
        );
        assert_eq!(
            super::redacted("postgres://db.example/agwire"),
            "postgres://db.example/agwire"
        );
    }
}
