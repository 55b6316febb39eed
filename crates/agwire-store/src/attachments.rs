//! Uploaded attachments' records (and the bytes kept beside the database).

use async_trait::async_trait;

use crate::error::Error;

/// An uploaded attachment's record (its bytes live with the attachment
/// storage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentRecord {
    /// Its owner.
    pub user_id: String,
    /// Its sniffed type.
    pub mime_type: String,
    /// Its bytes are in the store's bucket (read through the store's [`Blobs`](crate::Blobs)),
    /// not beside the database.
    pub in_bucket: bool,
}

/// Uploaded attachments: who owns each, its type, its bytes — where every
/// process serving the database can read them (the store's S3-compatible
/// bucket when it has one; else files beside an embedded database, rows of
/// a shared one).
#[async_trait]
pub trait AttachmentStore: Send + Sync {
    /// Stores an upload (`id` a UUID the service minted) beside the
    /// database: its bytes, then its record, so a record always has its
    /// bytes.
    async fn insert_attachment(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        bytes: &[u8],
        now_ms: i64,
    ) -> Result<(), Error>;

    /// Records an upload whose bytes the caller put in the bucket
    /// (first: a record always has its bytes).
    async fn insert_attachment_in_bucket(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        size: usize,
        now_ms: i64,
    ) -> Result<(), Error>;

    /// Marks an attachment kept beside the database as now in the bucket
    /// (its copy there verified), and drops the copy beside the database.
    async fn moved_to_bucket(&self, id: &str) -> Result<(), Error>;

    /// The ids of the attachments still kept beside the database, after
    /// `after` (in id order), at most `limit`.
    async fn attachments_not_in_bucket(
        &self,
        after: &str,
        limit: u32,
    ) -> Result<Vec<String>, Error>;

    /// An attachment's owner, type and where its bytes are.
    async fn attachment(&self, id: &str) -> Result<Option<AttachmentRecord>, Error>;

    /// An attachment's bytes, wherever they are.
    async fn attachment_bytes(&self, id: &str) -> Result<Option<Vec<u8>>, Error>;

    /// The key every process sharing the database signs attachment URLs
    /// with (the first to ask creates it), so a URL one replica signed
    /// verifies on any other. `None` for an embedded database: its one
    /// process keeps its key in its data directory.
    async fn url_signing_key(&self) -> Result<Option<Vec<u8>>, Error> {
        Ok(None)
    }
}
