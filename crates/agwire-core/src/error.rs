//! The crate's error type.

use crate::chunk::ChunkError;
use crate::decode::DecodeError;
use crate::verify::VerifyError;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Text that is not JSON.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON that is not the protocol type it claims to be.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A chunk event that cannot be expanded.
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    /// An event sequence the protocol does not allow.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}
