//! Uploaded images as a run meets them: signed URLs that name them, the
//! references a stored message keeps instead, and the bytes the model sees
//! (the images themselves are the store's:
//! [`crate::store::AttachmentStore`]). A URL becomes a reference when a run
//! is accepted ([`Attachments::to_references`]), a reference becomes a fresh
//! URL when history is read ([`Attachments::sign`]), and a `data:` URL when
//! the model reads the conversation (`inline_images`).
//!
//! With a bucket configured ([`Bucket`]), new attachments' bytes are there
//! and their URLs are the bucket's own presigned URLs: a run may give one
//! back while it has not expired, and the attachment's record must name
//! the caller as its owner ([`Attachments::verified_bucket_urls`]).
//!
//! A URL is `{base}/api/v1/agent/attachments/{id}?exp={unix seconds}&sig={hex}`
//! where `sig` is HMAC-SHA256 over the id, the owner and the expiry with the
//! service's secret (created once in the data directory, or shared by the
//! replicas through their database). The signature is
//! the credential: it proves the URL was issued for that user's attachment
//! and has not expired. Runs store `attachment:{id}` references, never URLs;
//! history signs fresh ones.

mod bucket;

use std::io;
use std::path::Path;
use std::sync::Arc;

pub use bucket::{Bucket, UploadError};

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

pub use crate::store::{REFERENCE_PREFIX, image_references};
/// Where attachment URLs live.
pub const PATH_PREFIX: &str = "/api/v1/agent/attachments/";

/// Upload limits and the key that signs attachment URLs.
#[derive(Clone)]
pub struct Attachments {
    secret: Vec<u8>,
    /// Where new attachments go and whose URLs it hands out, if configured.
    bucket: Option<Arc<Bucket>>,
    /// Largest upload, bytes.
    pub max_bytes: usize,
    /// How long a signed URL stays valid, seconds.
    pub ttl_seconds: i64,
}

impl std::fmt::Debug for Attachments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachments")
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Attachments {
    /// The signing key kept in `data_dir` (created the first time).
    pub fn open(data_dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(data_dir)?;
        let secret_path = data_dir.join("url-signing.key");
        let secret = match std::fs::read(&secret_path) {
            Ok(secret) if secret.len() >= 32 => secret,
            _ => {
                let secret: Vec<u8> = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
                    .iter()
                    .flat_map(|u| u.into_bytes())
                    .collect();
                write_private(&secret_path, &secret)?;
                secret
            }
        };
        Ok(Self {
            secret,
            bucket: None,
            max_bytes: 10 * 1024 * 1024,
            ttl_seconds: 3600,
        })
    }

    /// Signs with `key` instead (the one replicas share through their
    /// database: [`crate::store::AttachmentStore::url_signing_key`]).
    #[must_use]
    pub fn with_key(mut self, key: Vec<u8>) -> Self {
        self.secret = key;
        self
    }

    /// New attachments go to `bucket`, and their URLs are its presigned
    /// URLs (the same bucket the store reads them from, as its
    /// [`crate::store::Blobs`]).
    #[must_use]
    pub fn with_bucket(mut self, bucket: Arc<Bucket>) -> Self {
        self.bucket = Some(bucket);
        self
    }

    /// The bucket, if one is configured.
    pub fn bucket(&self) -> Option<&Arc<Bucket>> {
        self.bucket.as_ref()
    }

    /// A URL to download `user`'s attachment `id`, valid for the URL
    /// lifetime, with its expiry (unix seconds): the bucket's presigned URL
    /// when its bytes are there, else one this service signs.
    pub async fn url(
        &self,
        base: &str,
        id: &str,
        user: &str,
        in_bucket: bool,
        now_s: i64,
    ) -> Result<(String, i64), crate::Error> {
        match (&self.bucket, in_bucket) {
            (Some(bucket), true) => bucket.signed_url(id, self.ttl_seconds, now_s).await,
            _ => Ok(self.sign(base, id, user, now_s)),
        }
    }

    /// Whether `url` may stand for an image in a run of `user`: a URL this
    /// service signed for them, or one of `verified` — the bucket's
    /// presigned URLs of their own attachments ([`Attachments::verified_bucket_urls`]).
    pub fn accepts_url(&self, url: &str, user: &str, verified: &[String], now_s: i64) -> bool {
        self.verify_url(url, user, now_s).is_some() || verified.iter().any(|v| v == url)
    }

    /// The bucket URLs a request body names (as written in it: an escaped
    /// URL names none, and is refused) that the bucket presigned, that have
    /// not expired, and whose attachment is `user`'s. A presigned URL names
    /// an object, not its owner: the record says whose it is. Read before
    /// the (synchronous) validation judges each URL in its rule's turn.
    pub async fn verified_bucket_urls(
        &self,
        store: &dyn crate::store::Store,
        body: &[u8],
        user: &str,
        now_s: i64,
    ) -> Result<Vec<String>, crate::Error> {
        let Some(bucket) = &self.bucket else {
            return Ok(Vec::new());
        };
        let Ok(body) = std::str::from_utf8(body) else {
            return Ok(Vec::new());
        };
        let mut verified: Vec<String> = Vec::new();
        for (at, _) in body.match_indices(bucket.url_prefix()) {
            let rest = &body[at..];
            let url = &rest[..rest.find('"').unwrap_or(rest.len())];
            if verified.iter().any(|v| v == url) {
                continue;
            }
            let Some(id) = bucket.verify_url(url, now_s).await else {
                continue;
            };
            if store
                .attachment(&id)
                .await?
                .is_some_and(|record| record.user_id == user)
            {
                verified.push(url.to_owned());
            }
        }
        Ok(verified)
    }

    fn mac(&self, id: &str, user: &str, exp: i64) -> HmacSha256 {
        // A key of any length is accepted by HMAC.
        let Ok(mut mac) = HmacSha256::new_from_slice(&self.secret) else {
            unreachable!("HMAC takes keys of any length")
        };
        mac.update(id.as_bytes());
        mac.update(b"\n");
        mac.update(user.as_bytes());
        mac.update(b"\n");
        mac.update(exp.to_string().as_bytes());
        mac
    }

    /// A URL for `user`'s attachment `id`, valid until `now + ttl`; returns it
    /// with its expiry (unix seconds).
    pub fn sign(&self, base: &str, id: &str, user: &str, now_s: i64) -> (String, i64) {
        // A lifetime as long as the configuration allows (any positive
        // i64) ends at the last second there is, not in an overflow.
        let exp = now_s.saturating_add(self.ttl_seconds);
        let sig = hex::encode(self.mac(id, user, exp).finalize().into_bytes());
        (format!("{base}{PATH_PREFIX}{id}?exp={exp}&sig={sig}"), exp)
    }

    /// The attachment id a URL names, if it is a valid, unexpired URL this
    /// service signed for `user`. Only the path and query are judged: the
    /// host may be whatever the client reached us by. The query must be
    /// exactly what [`Attachments::sign`] writes (`exp`, `sig`, once each,
    /// no fragment): what the signature does not cover is not read.
    pub fn verify_url(&self, url: &str, user: &str, now_s: i64) -> Option<String> {
        let start = url.find(PATH_PREFIX)? + PATH_PREFIX.len();
        let rest = &url[start..];
        let (id, query) = rest.split_once('?')?;
        let mut exp = None;
        let mut sig = None;
        for pair in query.split('&') {
            let (name, value) = pair.split_once('=')?;
            let first = match name {
                "exp" => exp.replace(value.parse::<i64>().ok()?).is_none(),
                "sig" => sig.replace(hex::decode(value).ok()?).is_none(),
                _ => false,
            };
            if !first {
                return None;
            }
        }
        self.verify(id, user, exp?, &sig?, now_s)
            .then(|| id.to_owned())
    }

    /// Whether `sig` signs `id` for `user` until `exp`, and `exp` is ahead.
    pub fn verify(&self, id: &str, user: &str, exp: i64, sig: &[u8], now_s: i64) -> bool {
        is_id(id) && exp > now_s && self.mac(id, user, exp).verify_slice(sig).is_ok()
    }

    /// Replaces the user messages' attachment URLs (this user's signed
    /// URLs, unexpired; the bucket's presigned ones, whose owner was
    /// checked) by the references a run stores.
    pub fn to_references(&self, input: &mut agwire_core::RunAgentInput, user: &str, now_s: i64) {
        use agwire_core::{Content, ContentPart, Message, PartSource};
        for message in &mut input.messages {
            let Message::User(message) = message else {
                continue;
            };
            let Content::Parts(parts) = &mut message.content else {
                continue;
            };
            for part in parts.iter_mut() {
                if let ContentPart::Image(media) = part
                    && let PartSource::Url { value, .. } = &mut media.source
                    && let Some(id) = self
                        .verify_url(value, user, now_s)
                        .or_else(|| self.bucket.as_ref().and_then(|b| b.id_of_url(value, now_s)))
                {
                    *value = format!("{REFERENCE_PREFIX}{id}");
                }
            }
        }
    }
}

/// Largest image sent to the model inline.
pub const MAX_INLINE_IMAGE_BYTES: usize = 5 * 1024 * 1024;
/// Most bytes of images one run sends to the model inline (base64 makes
/// them a third larger): what a run holds while it starts, and what its
/// model calls carry.
pub const MAX_INLINE_BYTES_PER_RUN: usize = 8 * 1024 * 1024;
/// Most images one run sends to the model inline, and so most attachment
/// lookups it makes for them (a message may name thousands).
pub const MAX_INLINE_IMAGES_PER_RUN: usize = 16;

/// The model must see the user's images: stored attachment references
/// become `data:` URLs — the user's own attachments only, newest first,
/// each image once (at its latest mention; earlier ones stay references), up
/// to [`MAX_INLINE_IMAGES_PER_RUN`] images and [`MAX_INLINE_BYTES_PER_RUN`]
/// bytes. What is not inlined stays a reference, which the model is told
/// about as text (another user's, gone, too large, over the budget). A
/// bucket that cannot be read is an error: the run cannot be given what
/// its user sent.
pub(crate) async fn inline_images(
    store: &dyn crate::store::Store,
    user: &str,
    mut history: Vec<agwire_core::Message>,
) -> Result<Vec<agwire_core::Message>, crate::Error> {
    use agwire_core::{Content, ContentPart, Message, PartSource};
    use base64::Engine;
    let mut looked_up: Vec<String> = Vec::new();
    let mut spent = 0usize;
    for message in history.iter_mut().rev() {
        let Message::User(message) = message else {
            continue;
        };
        let Content::Parts(parts) = &mut message.content else {
            continue;
        };
        for part in parts.iter_mut().rev() {
            let ContentPart::Image(media) = part else {
                continue;
            };
            let PartSource::Url { value, .. } = &mut media.source else {
                continue;
            };
            let Some(id) = value.strip_prefix(REFERENCE_PREFIX).map(str::to_owned) else {
                continue;
            };
            if looked_up.contains(&id) || looked_up.len() >= MAX_INLINE_IMAGES_PER_RUN {
                continue;
            }
            looked_up.push(id.clone());
            let Ok(Some(record)) = store.attachment(&id).await else {
                continue;
            };
            if record.user_id != user {
                continue;
            }
            match store.attachment_bytes(&id).await {
                Ok(Some(bytes))
                    if bytes.len() <= MAX_INLINE_IMAGE_BYTES
                        && bytes.len() <= MAX_INLINE_BYTES_PER_RUN - spent =>
                {
                    spent += bytes.len();
                    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                    *value = format!("data:{};base64,{data}", record.mime_type);
                }
                Err(error @ crate::store::Error::Blobs(_)) => return Err(error.into()),
                _ => {}
            }
        }
    }
    Ok(history)
}

/// How long an object may go without a record before [`sweep`] takes it
/// for what a crash left: an upload records its object the moment it is
/// written, so only a process that died in between leaves one older.
pub const SWEEP_GRACE_SECONDS: i64 = 3600;

/// Removes what a crash can leave in the bucket: attachment objects no
/// record names, written more than `grace_s` before `now_s`. Objects not
/// named like an attachment are not the service's and stay. Returns how
/// many were removed. (Parts of multipart uploads a crash interrupted are
/// not objects: the bucket's lifecycle rule for incomplete multipart
/// uploads removes them — docs/DEPLOY.md.)
pub async fn sweep(
    store: &dyn crate::store::Store,
    bucket: &Bucket,
    grace_s: i64,
    now_s: i64,
) -> Result<u64, crate::Error> {
    let mut removed = 0;
    for (id, written_s) in bucket.list().await? {
        if written_s + grace_s > now_s || store.attachment(&id).await?.is_some() {
            continue;
        }
        bucket.delete(&id).await?;
        removed += 1;
    }
    Ok(removed)
}

/// What [`copy_to_bucket`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    /// Attachments now in the bucket (copied, read back, hash-checked).
    pub moved: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Records whose bytes were already gone (left as they were).
    pub missing: u64,
}

/// Moves the attachments kept beside the database into `bucket`: each one
/// copied, read back and compared by SHA-256, and only then recorded as in
/// the bucket (its copy beside the database dropped). Idempotent and
/// resumable: what was moved is recorded as moved, so a run stopped
/// anywhere — even between the copy and the record — starts again where
/// it was (an object copied twice is the same object). `each` sees every
/// attachment moved.
pub async fn copy_to_bucket(
    store: &dyn crate::store::Store,
    bucket: &Bucket,
    mut each: impl FnMut(&str, usize),
) -> Result<Copied, crate::Error> {
    use sha2::Digest;
    let mut copied = Copied::default();
    let mut after = String::new();
    loop {
        let ids = store.attachments_not_in_bucket(&after, 100).await?;
        let Some(last) = ids.last() else { break };
        after.clone_from(last);
        for id in ids {
            let (Some(record), Some(bytes)) = (
                store.attachment(&id).await?,
                store.attachment_bytes(&id).await?,
            ) else {
                copied.missing += 1;
                continue;
            };
            let size = bytes.len();
            let want = Sha256::digest(&bytes);
            bucket.put(&id, &record.mime_type, bytes).await?;
            let back = bucket.bytes(&id).await?.unwrap_or_default();
            if Sha256::digest(&back) != want {
                return Err(crate::StoreError::Blobs(format!(
                    "attachment {id}: the copy read back from the bucket differs from the original (sha256)"
                ))
                .into());
            }
            store.moved_to_bucket(&id).await?;
            copied.moved += 1;
            copied.bytes += size as u64;
            each(&id, size);
        }
    }
    Ok(copied)
}

pub(crate) use crate::store::is_attachment_id as is_id;

/// The image type the bytes are, judged by their signature (not by what the
/// client claims).
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    std::fs::write(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Attachments {
        let dir = std::env::temp_dir().join(format!("agwire-att-{}", uuid::Uuid::new_v4()));
        Attachments::open(&dir).unwrap()
    }

    #[test]
    fn signed_urls_verify_only_untampered_unexpired_and_for_their_user() {
        let a = store();
        let id = uuid::Uuid::new_v4().to_string();
        let (url, exp) = a.sign("http://h", &id, "alice", 1000);
        assert_eq!(
            a.verify_url(&url, "alice", 1000).as_deref(),
            Some(id.as_str())
        );
        assert_eq!(
            a.verify_url(&url.replace("http://h", "https://other"), "alice", 1000)
                .as_deref(),
            Some(id.as_str())
        );
        assert!(a.verify_url(&url, "bob", 1000).is_none(), "another user's");
        assert!(a.verify_url(&url, "alice", exp).is_none(), "expired");
        let tampered_exp = url.replace(&format!("exp={exp}"), &format!("exp={}", exp + 1000));
        assert!(a.verify_url(&tampered_exp, "alice", 1000).is_none());
        let mut tampered_sig = url.clone();
        let last = tampered_sig.pop().unwrap();
        tampered_sig.push(if last == '0' { '1' } else { '0' });
        assert!(a.verify_url(&tampered_sig, "alice", 1000).is_none());
        let other_id = url.replace(&id, &uuid::Uuid::new_v4().to_string());
        assert!(a.verify_url(&other_id, "alice", 1000).is_none());
        // Nothing the signature does not cover is read: a fragment, a
        // parameter twice, another parameter.
        for extra in ["#x", "&exp=99999", "&sig=00", "&v=1"] {
            assert!(
                a.verify_url(&format!("{url}{extra}"), "alice", 1000)
                    .is_none(),
                "{extra}"
            );
        }
        // Another service's secret signs nothing here.
        let (foreign, _) = store().sign("http://h", &id, "alice", 1000);
        assert!(a.verify_url(&foreign, "alice", 1000).is_none());
    }

    #[test]
    fn expiries_at_the_end_of_time_neither_overflow_nor_verify_what_was_not_signed() {
        let mut a = store();
        // As long as `attachments.url_ttl_seconds` may be (positive).
        a.ttl_seconds = i64::MAX;
        let id = uuid::Uuid::new_v4().to_string();
        let now = 1_700_000_000;
        let (url, exp) = a.sign("http://h", &id, "alice", now);
        assert_eq!(exp, i64::MAX, "the latest expiry there is");
        assert_eq!(
            a.verify_url(&url, "alice", now).as_deref(),
            Some(id.as_str())
        );
        // Expiries at and past both ends of an i64, claimed: none signed.
        for claimed in [
            "-9223372036854775808",
            "-1",
            "0",
            "9223372036854775806",
            "9223372036854775808",
            "18446744073709551615",
        ] {
            let tampered = url.replace(&format!("exp={exp}"), &format!("exp={claimed}"));
            assert!(a.verify_url(&tampered, "alice", now).is_none(), "{claimed}");
        }
    }

    #[test]
    fn image_types_come_from_the_bytes() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a..."), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"%PDF-1.7"), None);
        assert_eq!(sniff(b"<svg"), None);
    }
}
