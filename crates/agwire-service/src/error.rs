//! The crate's error type: what went wrong, as kinds. The sentences a client
//! reads for them are the API's (`api/error.rs`), not the store's.

/// The store's error kinds, as the service's callers match them.
pub use agwire_store::Error as StoreError;

/// Why the service could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store failed, or refused what was asked (another user's thread,
    /// a busy thread, a reused `runId`, …: the kinds are the store's).
    #[error(transparent)]
    Store(#[from] agwire_store::Error),
    /// Files (the attachments' signing key, files beside the database)
    /// could not be read or written.
    #[error("storage: {0}")]
    Io(#[from] std::io::Error),
    /// A value could not be (de)serialized.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The service is shutting down.
    #[error("shutting down")]
    ShuttingDown,
    /// The configuration is invalid.
    #[error("configuration: {0}")]
    Config(String),
    /// The data dir could not be created.
    #[error("data dir {}: {source}", path.display())]
    DataDir {
        /// The configured data dir.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The embedded database could not be opened.
    #[error("{}: {source}", path.display())]
    OpenDatabase {
        /// Its file.
        path: std::path::PathBuf,
        /// Why.
        source: agwire_store::Error,
    },
    /// The attachments' signing key in the data dir could not be read or
    /// created.
    #[error("attachments in {}: {source}", path.display())]
    AttachmentsDir {
        /// The data dir.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The model could not be set up (the provider's client, the local
    /// model's download or load).
    #[error("model: {0}")]
    Model(#[from] agwire_llm::Error),
    /// Something that should not fail did (500; the detail is logged, not
    /// shown).
    #[error("internal: {0}")]
    Internal(String),
}

impl From<object_store::Error> for Error {
    fn from(error: object_store::Error) -> Self {
        Self::Store(StoreError::Blobs(error.to_string()))
    }
}
