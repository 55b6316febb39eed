//! Attachment bytes kept apart from the database (an S3-compatible bucket):
//! the store records them and, for a reader that has only the store, reads
//! and removes them through [`Blobs`]. Where they live and how they are
//! reached is the implementor's (the service's `attachments::Bucket`); the
//! store names no bucket, so it does not depend on the code that uploads.

use std::fmt;

use async_trait::async_trait;

use crate::error::Error;

/// Where attachments' bytes are kept apart from the database, by attachment
/// id.
#[async_trait]
pub trait Blobs: Send + Sync + fmt::Debug {
    /// Attachment `id`'s bytes (`None`: no such object).
    async fn bytes(&self, id: &str) -> Result<Option<Vec<u8>>, Error>;

    /// Removes attachment `id`'s bytes (no error when there were none).
    async fn delete(&self, id: &str) -> Result<(), Error>;
}

/// The bytes of an attachment recorded as kept in `blobs`.
pub(crate) async fn blob_bytes(
    blobs: Option<&dyn Blobs>,
    id: &str,
) -> Result<Option<Vec<u8>>, Error> {
    match blobs {
        Some(blobs) => blobs.bytes(id).await,
        None => Err(Error::Blobs(format!(
            "attachment {id} is in a bucket, and none is configured ([attachments] url)"
        ))),
    }
}

/// Removes deleted attachments' bytes from `blobs`, if there are any kept
/// there (after their records' commit, as their files; what a crash leaves
/// is never served).
pub(crate) async fn remove_blobs(blobs: Option<&dyn Blobs>, ids: &[String]) {
    let Some(blobs) = blobs else { return };
    for id in ids {
        if let Err(error) = blobs.delete(id).await {
            tracing::warn!(%error, attachment = %id, "could not remove a deleted attachment's object");
        }
    }
}
