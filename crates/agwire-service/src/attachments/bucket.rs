//! Attachments' bytes in an S3-compatible bucket (AWS S3, Supabase Storage,
//! MinIO, SeaweedFS, …), through `object_store` — maintained by the Apache
//! Arrow project, used by DataFusion and Delta Lake: SigV4 signing and
//! presigned URLs, multipart uploads, retries, and the credential chain the
//! AWS SDKs read (environment, web identity, ECS/EKS, instance metadata),
//! with no AWS SDK to carry. One object per attachment, at `{prefix}/{id}`,
//! with its content type, so a presigned `GET` serves the image as it is:
//! downloads never pass through a replica.
//!
//! What the database keeps is the record (owner, type, size, that the bytes
//! are here); every replica sharing it reaches the same bucket.

use std::sync::Arc;
use std::time::Duration;

// (`bytes::Bytes`, what `object_store` writes, through a crate we depend on.)
use futures_util::{Stream, StreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::signer::Signer;
use object_store::{Attribute, Attributes, ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;
use tokio_util::bytes::Bytes;

use crate::config::AttachmentsConfig;
use crate::error::Error;

/// The part size of a multipart upload, and the most of one upload held in
/// memory at once: S3 takes parts of at least 5 MiB (all but the last), so
/// an upload up to this size is one `PUT`, a larger one parts of this size.
const PART_BYTES: usize = 5 * 1024 * 1024;

/// A bucket (and a key prefix in it) that holds attachments.
#[derive(Debug, Clone)]
pub struct Bucket {
    store: Arc<AmazonS3>,
    prefix: Path,
    /// The region its URLs are signed for (SigV4's scope).
    region: String,
    /// What every URL this bucket presigns for an attachment starts with
    /// (`{endpoint}/{bucket}/{prefix}/`, or the virtual-hosted form): a URL
    /// given back in a run must too.
    base: String,
}

/// Why an upload did not become an object.
#[derive(Debug)]
pub enum UploadError<E> {
    /// The body went past the size limit (what was sent is gone).
    TooLarge,
    /// The body could not be read (the client's error, passed on).
    Body(E),
    /// The bucket failed.
    Bucket(Error),
}

/// What the store reads and removes of attachments recorded as in the
/// bucket.
#[async_trait::async_trait]
impl agwire_store::Blobs for Bucket {
    async fn bytes(&self, id: &str) -> Result<Option<Vec<u8>>, agwire_store::Error> {
        Bucket::bytes(self, id).await.map_err(blobs_error)
    }

    async fn delete(&self, id: &str) -> Result<(), agwire_store::Error> {
        Bucket::delete(self, id).await.map_err(blobs_error)
    }
}

/// The bucket's failure, as the store's.
fn blobs_error(error: Error) -> agwire_store::Error {
    match error {
        Error::Store(error) => error,
        other => agwire_store::Error::Blobs(other.to_string()),
    }
}

impl Bucket {
    /// The bucket `config.url` names (`s3://bucket/prefix`), reached at
    /// `config.endpoint` (else `AWS_ENDPOINT_URL`, else AWS for the region),
    /// with credentials from the standard AWS chain (`AWS_ACCESS_KEY_ID`…).
    /// Presigns once, so a configuration without usable credentials fails
    /// here, at start, not at the first upload.
    pub async fn open(url: &str, config: &AttachmentsConfig) -> Result<Self, Error> {
        let bad = |why: String| Error::Config(format!("attachments.url {url:?}: {why}"));
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("must be s3://bucket[/prefix]".into()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("names no bucket".into()));
        }
        // A bucket that does not answer is said within seconds (a 503 for
        // an upload, a run's error), not after object_store's default three
        // minutes of retries; a transient failure still gets retried.
        let retry = object_store::RetryConfig {
            max_retries: 3,
            retry_timeout: Duration::from_secs(10),
            ..Default::default()
        };
        let client = object_store::ClientOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(60));
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_virtual_hosted_style_request(config.virtual_hosted)
            .with_retry(retry)
            .with_client_options(client);
        let endpoint = config
            .endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
            .filter(|e| !e.is_empty());
        if let Some(endpoint) = &endpoint {
            // A plain-HTTP endpoint is one the operator wrote down (a
            // bucket on the same host or network); AWS's are HTTPS.
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        let region = config
            .region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok())
            .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "us-east-1".to_owned());
        builder = builder.with_region(&region);
        if let (Some(id), Some(secret)) = (&config.access_key_id, &config.secret_access_key) {
            builder = builder
                .with_access_key_id(id)
                .with_secret_access_key(secret);
        }
        let store = Arc::new(builder.build().map_err(|e| bad(e.to_string()))?);
        let prefix = Path::from(prefix.trim_matches('/'));
        // The URL prefix, as the signer writes it: everything before the
        // probe's name.
        let probe = prefix.clone().join("probe");
        let signed = store
            .signed_url(reqwest::Method::GET, &probe, Duration::from_secs(60))
            .await
            .map_err(|e| bad(format!("cannot presign URLs: {e}")))?;
        let signed = signed.as_str();
        let base = signed
            .find("probe?")
            .map(|at| signed[..at].to_owned())
            .ok_or_else(|| bad(format!("unexpected presigned URL {signed}")))?;
        Ok(Self {
            store,
            prefix,
            region,
            base,
        })
    }

    /// What every URL this bucket presigns for an attachment starts with.
    pub fn url_prefix(&self) -> &str {
        &self.base
    }

    /// Where attachment `id` lives.
    fn path(&self, id: &str) -> Path {
        self.prefix.clone().join(id)
    }

    /// Streams an upload into the object for `id`: `head` (already read)
    /// then `rest`, at most `max_bytes` in all — counted as it arrives, so
    /// a body past the limit is refused once it passes it, never held
    /// whole. Anything that fails leaves no object, nor a part of one (the
    /// multipart upload is aborted). Returns the size.
    pub async fn upload<S, E>(
        &self,
        id: &str,
        mime_type: &str,
        head: Bytes,
        mut rest: S,
        max_bytes: usize,
    ) -> Result<usize, UploadError<E>>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
    {
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::ContentType, mime_type.to_owned().into());
        let store: Arc<dyn ObjectStore> = self.store.clone();
        // One part buffered, one in flight: a few MiB per upload, whatever
        // its size.
        let mut writer = BufWriter::with_capacity(store, self.path(id), PART_BYTES)
            .with_max_concurrency(1)
            .with_attributes(attributes);
        let mut chunks = futures_util::stream::iter([Ok(head)]).chain(&mut rest);
        let mut size = 0usize;
        let failed = loop {
            let chunk = match chunks.next().await {
                None => break None,
                Some(Ok(chunk)) => chunk,
                Some(Err(error)) => break Some(UploadError::Body(error)),
            };
            size += chunk.len();
            if size > max_bytes {
                break Some(UploadError::TooLarge);
            }
            if let Err(error) = writer.put(chunk).await {
                break Some(UploadError::Bucket(error.into()));
            }
        };
        if let Some(failed) = failed {
            if let Err(error) = writer.abort().await {
                tracing::warn!(%error, attachment = %id, "could not abort an attachment's upload");
            }
            return Err(failed);
        }
        // Completes the upload: one PUT, or the multipart upload's last
        // part and its completion.
        writer
            .shutdown()
            .await
            .map_err(|e| UploadError::Bucket(agwire_store::Error::Blobs(e.to_string()).into()))?;
        Ok(size)
    }

    /// The object's bytes (`None`: not there).
    pub async fn bytes(&self, id: &str) -> Result<Option<Vec<u8>>, Error> {
        match self.store.get(&self.path(id)).await {
            Ok(got) => Ok(Some(got.bytes().await?.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Stores `bytes` as the object for `id` in one `PUT` (the copy of an
    /// attachment kept elsewhere: `agwire attachments copy-to-bucket`).
    pub async fn put(&self, id: &str, mime_type: &str, bytes: Vec<u8>) -> Result<(), Error> {
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::ContentType, mime_type.to_owned().into());
        self.store
            .put_opts(
                &self.path(id),
                bytes.into(),
                object_store::PutOptions {
                    attributes,
                    ..Default::default()
                },
            )
            .await?;
        Ok(())
    }

    /// The attachments' objects in the bucket — named by an id we mint,
    /// right under the prefix — with when each was written (unix seconds).
    pub async fn list(&self) -> Result<Vec<(String, i64)>, Error> {
        let mut listed = self.store.list(Some(&self.prefix));
        let mut found = Vec::new();
        while let Some(meta) = listed.next().await {
            let meta = meta?;
            let Some(id) = meta.location.filename() else {
                continue;
            };
            if super::is_id(id) && meta.location == self.path(id) {
                found.push((id.to_owned(), meta.last_modified.timestamp()));
            }
        }
        Ok(found)
    }

    /// Removes the object for `id` (gone already is fine).
    pub async fn delete(&self, id: &str) -> Result<(), Error> {
        match self.store.delete(&self.path(id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// A presigned `GET` URL for attachment `id`, valid for `ttl_seconds`;
    /// with its expiry (unix seconds).
    pub async fn signed_url(
        &self,
        id: &str,
        ttl_seconds: i64,
        now_s: i64,
    ) -> Result<(String, i64), Error> {
        let ttl = u64::try_from(ttl_seconds).unwrap_or(1).max(1);
        let url = self
            .store
            .signed_url(
                reqwest::Method::GET,
                &self.path(id),
                Duration::from_secs(ttl),
            )
            .await?;
        Ok((url.into(), now_s.saturating_add(ttl_seconds.max(1))))
    }

    /// The attachment a URL this bucket presigned names, if its SigV4
    /// signature is the one the bucket's credentials give (AWS's
    /// query-string authentication: the canonical `GET` of its path, its
    /// query but the signature, its host, an unsigned payload) and it has
    /// not expired. Whether the attachment is the caller's is the record's
    /// to say (the URL does not name its owner).
    pub async fn verify_url(&self, url: &str, now_s: i64) -> Option<String> {
        use hmac::Mac;
        use sha2::Digest;
        let id = self.id_of_url(url, now_s)?;
        let parsed = reqwest::Url::parse(url).ok()?;
        let credential = self.store.credentials().get_credential().await.ok()?;
        // Every parameter but the signature, decoded, encoded as SigV4 does
        // (unreserved characters only), sorted by name then value.
        let mut signature = None;
        let mut date = None;
        let mut pairs = Vec::new();
        for (name, value) in parsed.query_pairs() {
            match name.as_ref() {
                "X-Amz-Signature" => {
                    signature = Some(value.into_owned());
                    continue;
                }
                "X-Amz-Credential"
                    if value.split('/').next() != Some(credential.key_id.as_str()) =>
                {
                    return None;
                }
                "X-Amz-Date" => date = Some(value.to_string()),
                _ => {}
            }
            pairs.push((sigv4_encode(&name), sigv4_encode(&value)));
        }
        pairs.sort_unstable();
        let query = pairs
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("&");
        let host = match parsed.port() {
            Some(port) => format!("{}:{port}", parsed.host_str()?),
            None => parsed.host_str()?.to_owned(),
        };
        let request = format!(
            "GET\n{}\n{query}\nhost:{host}\n\nhost\nUNSIGNED-PAYLOAD",
            parsed.path()
        );
        let date = date?;
        let day = date.get(..8)?;
        let scope = format!("{day}/{}/s3/aws4_request", self.region);
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
            hex::encode(sha2::Sha256::digest(request.as_bytes()))
        );
        let mut key = format!("AWS4{}", credential.secret_key).into_bytes();
        for part in [day, self.region.as_str(), "s3", "aws4_request"] {
            key = hmac_sha256(&key, part.as_bytes())?;
        }
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).ok()?;
        mac.update(to_sign.as_bytes());
        let signature = hex::decode(signature?).ok()?;
        // (Constant time: the signature is a credential.)
        mac.verify_slice(&signature).ok().map(|()| id)
    }

    /// The attachment a URL of this bucket names, while it has not
    /// expired: it starts with this bucket's prefix, names an id we mint,
    /// and carries a SigV4 query signature whose date and lifetime put its
    /// end after `now_s` (whether the signature is right is
    /// [`Bucket::verify_url`]'s to say).
    ///
    /// The date and lifetime are read from exactly the query the signature
    /// covers: the URL parsed as a whole, no fragment (the bucket never
    /// presigns one, and its text is not signed: `#&X-Amz-Expires=…` must
    /// not stretch a lifetime), no parameter named twice, a lifetime of at
    /// most SigV4's seven days, and checked arithmetic.
    pub fn id_of_url(&self, url: &str, now_s: i64) -> Option<String> {
        let rest = url.strip_prefix(&self.base)?;
        let (id, _) = rest.split_once('?')?;
        if !super::is_id(id) {
            return None;
        }
        let parsed = reqwest::Url::parse(url).ok()?;
        if parsed.fragment().is_some() {
            return None;
        }
        let (mut date, mut expires, mut signed) = (None, None, false);
        let mut names = std::collections::HashSet::new();
        for (name, value) in parsed.query_pairs() {
            if !names.insert(name.clone()) {
                return None;
            }
            match name.as_ref() {
                "X-Amz-Date" => date = Some(value),
                "X-Amz-Expires" => {
                    expires = value
                        .parse::<i64>()
                        .ok()
                        .filter(|s| (1..=MAX_PRESIGNED_SECONDS).contains(s));
                }
                "X-Amz-Signature" => signed = !value.is_empty(),
                _ => {}
            }
        }
        let start = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", date?.as_ref())
            .ok()?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp()
            .as_second();
        let end = start.checked_add(expires?)?;
        (signed && end > now_s).then(|| id.to_owned())
    }
}

/// The longest lifetime SigV4 allows a presigned URL: seven days.
const MAX_PRESIGNED_SECONDS: i64 = 7 * 24 * 3600;

/// What SigV4 leaves unencoded in a canonical query: letters, digits and
/// `-._~`.
const SIGV4_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn sigv4_encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, SIGV4_UNRESERVED).to_string()
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).ok()?;
    mac.update(data);
    Some(mac.finalize().into_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bucket whose URLs are presigned with static credentials (no
    /// request is made: presigning and verifying are local).
    async fn bucket(prefix: &str) -> Bucket {
        let config = AttachmentsConfig {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("eu-west-3".into()),
            access_key_id: Some("AKIDEXAMPLE".into()),
            secret_access_key: Some("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into()),
            ..AttachmentsConfig::default()
        };
        Bucket::open(&format!("s3://agent-inputs/{prefix}"), &config)
            .await
            .unwrap()
    }

    /// Every URL object_store presigns verifies — prefixes with characters
    /// SigV4 encodes included — and no changed one does.
    #[tokio::test]
    async fn presigned_urls_verify_exactly_as_object_store_signs_them() {
        let now_s = jiff::Timestamp::now().as_second();
        for prefix in ["uploads", "a b+c/ü~x", ""] {
            let bucket = bucket(prefix).await;
            let id = uuid::Uuid::now_v7().to_string();
            let (url, _) = bucket.signed_url(&id, 600, now_s).await.unwrap();
            assert_eq!(
                bucket.verify_url(&url, now_s).await,
                Some(id.clone()),
                "{url}"
            );
            let expires = url
                .split(['?', '&'])
                .find(|p| p.starts_with("X-Amz-Expires="))
                .unwrap();
            let other = uuid::Uuid::now_v7().to_string();
            for changed in [
                url.replace(expires, "X-Amz-Expires=604800"),
                url.replace(&id, &other),
                url.replace("X-Amz-Signature=", "X-Amz-Signature=0"),
                url.replace("eu-west-3", "us-east-1"),
                format!("{url}&extra=1"),
                // Text the signature does not cover must not change what
                // is read: a fragment, a parameter named twice.
                format!("{url}#&X-Amz-Expires=604800"),
                format!("{url}&X-Amz-Expires=604800"),
            ] {
                assert_eq!(bucket.verify_url(&changed, now_s).await, None, "{changed}");
            }
            // Past its expiry it verifies no more, nor revived by text the
            // signature does not cover.
            assert_eq!(bucket.verify_url(&url, now_s + 601).await, None);
            for revived in [format!("{url}#&X-Amz-Expires=604800"), format!("{url}#")] {
                assert_eq!(bucket.id_of_url(&revived, now_s + 601), None, "{revived}");
            }
            // A lifetime past any date a clock can show is not an overflow.
            let huge = url.replace(expires, &format!("X-Amz-Expires={}", i64::MAX));
            assert_eq!(bucket.id_of_url(&huge, now_s), None);
        }
    }
}
