//! The crate's error type.

/// Everything that can go wrong reading or writing the AG-UI wire formats.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An SSE event grew past the decoder's limit before it was terminated.
    #[error("SSE event exceeds the maximum size of {limit} bytes")]
    SseEventTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// A protobuf frame announced a length past the decoder's limit.
    #[error("protobuf frame of {len} bytes exceeds the maximum of {limit} bytes")]
    FrameTooLarge {
        /// The announced length.
        len: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The body ended inside a protobuf frame: a truncated run.
    #[error("Incomplete or invalid protocol buffer data at stream end ({0} bytes left over)")]
    TruncatedFrame(usize),
    /// Bytes that are not a valid `ag_ui.Event` message.
    #[error("Failed to decode protocol buffer message: {0}")]
    Protobuf(String),
    /// An SSE `data` payload that is not JSON.
    #[error("invalid JSON in SSE event: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON (or a protobuf message) that is not a valid AG-UI event.
    #[error(transparent)]
    Decode(#[from] agwire_core::DecodeError),
    /// Any other protocol error.
    #[error(transparent)]
    Core(agwire_core::Error),
    /// An event with no form on this wire (an unknown event type in protobuf).
    #[error("{0}")]
    Unrepresentable(String),
}
