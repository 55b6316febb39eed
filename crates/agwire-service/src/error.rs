//! The crate's error type.

/// Why the service could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The embedded database's writer failed.
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Stored files (attachments) could not be read or written.
    #[error("storage: {0}")]
    Io(#[from] std::io::Error),
    /// A stored value could not be (de)serialized.
    #[error("stored JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A stored event could not be read back.
    #[error("stored event: {0}")]
    Event(#[from] agwire_core::Error),
    /// The thing does not exist for this user (404).
    #[error("{0}")]
    NotFound(String),
    /// The request clashes with an earlier one (409).
    #[error("{0}")]
    Conflict(String),
    /// The configuration is invalid.
    #[error("configuration: {0}")]
    Config(String),
    /// The thread already has an active run (409).
    #[error("{0}")]
    Busy(String),
    /// The service is shutting down (503).
    #[error("{0}")]
    Unavailable(String),
    /// Something that should not fail did (500; the detail is logged, not
    /// shown).
    #[error("internal: {0}")]
    Internal(String),
}
