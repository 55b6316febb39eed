//! The crate's error type.

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request never got an answer (connect, TLS, timeout).
    #[error("cannot reach the model: {0}")]
    Transport(String),
    /// The provider answered with an HTTP error.
    #[error("the provider answered {status}: {message}")]
    Http {
        /// The status code.
        status: u16,
        /// The provider's message (or the start of its body).
        message: String,
    },
    /// The provider reported an error inside the stream.
    #[error("the provider failed mid-stream: {0}")]
    Provider(String),
    /// The stream broke off before it said it was done.
    #[error("the stream ended before the model finished")]
    Truncated,
    /// A chunk could not be read.
    #[error("unreadable chunk: {0}")]
    Malformed(String),
    /// The local model could not load or generate.
    #[error("the local model failed: {0}")]
    Local(String),
    /// The local model's queue is full: the call was refused at once
    /// rather than left waiting without bound.
    #[error(
        "the local model is busy: {waiting} calls are already waiting for it (its queue holds {limit})"
    )]
    Busy {
        /// Calls waiting when this one came.
        waiting: usize,
        /// The queue's limit (`LocalConfig::queue`).
        limit: usize,
    },
    /// A scripted model ran out of replies (a test asked more than it set up).
    #[error("the scripted model has no reply left")]
    Exhausted,
}
