//! Attachment records and bytes, as the API's uploads, downloads, runs and
//! history reach them (the signing rules are in [`crate::attachments`]).

use super::{Engine, now_ms};
use crate::attachments::Attachments;
use crate::error::Error;
use crate::store::AttachmentRecord;

impl Engine {
    /// Records an upload whose bytes are already in the bucket.
    pub(crate) async fn record_bucket_attachment(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        size: usize,
    ) -> Result<(), Error> {
        Ok(self
            .store
            .insert_attachment_in_bucket(id, user, mime_type, size, now_ms())
            .await?)
    }

    /// Keeps an upload's bytes beside the database, and its record.
    pub(crate) async fn keep_attachment(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        bytes: &[u8],
    ) -> Result<(), Error> {
        Ok(self
            .store
            .insert_attachment(id, user, mime_type, bytes, now_ms())
            .await?)
    }

    /// Attachment `id`'s record, whoever owns it (a signed URL names its
    /// owner through it).
    pub(crate) async fn attachment(&self, id: &str) -> Result<Option<AttachmentRecord>, Error> {
        Ok(self.store.attachment(id).await?)
    }

    /// Attachment `id`'s record when `user` owns it.
    pub(crate) async fn users_attachment(
        &self,
        user: &str,
        id: &str,
    ) -> Result<Option<AttachmentRecord>, Error> {
        Ok(self
            .store
            .attachment(id)
            .await?
            .filter(|record| record.user_id == user))
    }

    /// Attachment `id`'s bytes, wherever they are.
    pub(crate) async fn attachment_bytes(&self, id: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.store.attachment_bytes(id).await?)
    }

    /// The bucket's presigned URLs in a run request's `body` that are
    /// `user`'s, checked (see [`Attachments::verified_bucket_urls`]).
    pub(crate) async fn verified_bucket_urls(
        &self,
        attachments: &Attachments,
        body: &[u8],
        user: &str,
        now_s: i64,
    ) -> Result<Vec<String>, Error> {
        attachments
            .verified_bucket_urls(&*self.store, body, user, now_s)
            .await
    }
}
