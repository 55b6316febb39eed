//! The crate's error type.

use std::time::Duration;

/// Why a run could not be read to its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client could not be built (bad URL, bad header, settings that
    /// cannot be combined).
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// The request could not be sent or the connection failed.
    #[error("HTTP transport error: {0}")]
    Transport(#[from] reqwest::Error),
    /// The server answered with a non-2xx status (before any event).
    #[error("HTTP {status}: {body}")]
    Status {
        /// The status code.
        status: u16,
        /// The response body, as text.
        body: String,
        /// The body parsed as JSON, when the server said it was JSON.
        json: Option<serde_json::Value>,
    },
    /// The body could not be decoded as events.
    #[error(transparent)]
    Codec(#[from] agwire_codec::Error),
    /// The stream broke the protocol (the official client's own message).
    #[error(transparent)]
    Protocol(#[from] agwire_core::Error),
    /// The body ended before the run's terminal event (and could not be
    /// resumed): the run's outcome is unknown, never success.
    #[error("the stream ended before the run finished")]
    Truncated,
    /// No bytes arrived for longer than the idle timeout.
    #[error("no data for {0:?}")]
    Idle(Duration),
    /// Reconnecting failed `attempts` times in a row.
    #[error("gave up reconnecting after {attempts} attempts: {last}")]
    ReconnectFailed {
        /// How many attempts were made.
        attempts: u32,
        /// The last attempt's error.
        last: Box<Error>,
    },
}
