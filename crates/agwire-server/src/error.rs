//! The crate's errors: what an emitter refuses, and what an agent fails with.

use std::fmt;

use agwire_core::verify::VerifyError;

/// Why the run context refused to send an event.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The event would make the stream invalid (the official client's own
    /// message). Nothing was sent; the context refuses everything after this,
    /// and the run ends with `RUN_ERROR` carrying this message.
    #[error("invalid event: {0}")]
    Invalid(#[from] VerifyError),
    /// A helper was used in a way the protocol does not allow (an unknown id,
    /// a delta that does not apply to the state, ...). Nothing was sent.
    #[error("{0}")]
    Misuse(String),
    /// The client went away and the endpoint's policy is to cancel the run.
    #[error("the client disconnected")]
    Disconnected,
    /// The run was cancelled.
    #[error("the run was cancelled")]
    Cancelled,
    /// The run already ended; nothing more can be sent.
    #[error("the run already ended")]
    Finished,
}

/// How an agent's run failed: becomes the run's `RUN_ERROR`.
///
/// Any error type converts into it with `?` (its `Display` becomes the
/// message), so an agent can return the errors of whatever it calls; set a
/// machine-readable code with [`AgentError::with_code`].
#[derive(Debug, Clone, PartialEq)]
pub struct AgentError {
    /// Human-readable message (`RUN_ERROR.message`).
    pub message: String,
    /// Machine-readable code (`RUN_ERROR.code`).
    pub code: Option<String>,
}

impl AgentError {
    /// An error with `message` and no code.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
        }
    }

    /// Sets the `RUN_ERROR.code`.
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} ({code})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

// Not `std::error::Error` on purpose: that is what lets every error convert.
impl<E: std::error::Error + Send + Sync + 'static> From<E> for AgentError {
    fn from(error: E) -> Self {
        let code = match (&error as &dyn std::error::Error).downcast_ref::<Error>() {
            Some(Error::Invalid(_)) => Some("invalid_event"),
            Some(Error::Disconnected) => Some("disconnected"),
            Some(Error::Cancelled) => Some("cancelled"),
            _ => None,
        };
        Self {
            message: error.to_string(),
            code: code.map(str::to_owned),
        }
    }
}
