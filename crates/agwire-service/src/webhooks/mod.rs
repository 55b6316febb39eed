//! Signed webhooks on run end, as the Standard Webhooks specification
//! (<https://www.standardwebhooks.com/>) has them: `POST <url>` with the
//! message's JSON body and the headers `webhook-id` (the same on every
//! attempt), `webhook-timestamp` (seconds, this attempt's) and
//! `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`,
//! keyed with the `whsec_…` secret's bytes.
//!
//! The messages come from the store's outbox, written in the transaction
//! that ends each run (see `agwire_store::WebhookStore`), so a message is
//! never lost to a crash; every process delivers what it claims, retrying
//! with backoff for a day (`deliver`). A receiver that hangs holds one
//! delivery for at most `timeout_seconds` and never a run. The URL may not
//! reach a loopback, private or link-local address unless
//! `allow_private` says so — checked on every connection's resolved
//! addresses, so DNS cannot point it there later — and redirects are not
//! followed.

mod address;
mod deliver;

use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::Error;

pub use deliver::Deliverer;

/// `[webhooks]`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// Where run-end messages are posted (`http` or `https`); unset, none
    /// are (`AGWIRE_WEBHOOK_URL`).
    pub url: Option<String>,
    /// The signing secret, `whsec_` then the base64 of 24 to 64 random bytes
    /// (`AGWIRE_WEBHOOK_SECRET`).
    pub secret: Option<String>,
    /// Let the URL reach loopback, private and link-local addresses (a
    /// receiver on the same machine or network).
    pub allow_private: bool,
    /// The waits (seconds) after each failed attempt, in order; after the
    /// last, the message is given up. Default: the Standard Webhooks
    /// schedule, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (about a day).
    pub retry_seconds: Vec<u64>,
    /// How long one attempt may take, connection included (1 to 60); one
    /// that takes longer has failed. A process's claim on a message lasts
    /// twice this and 5 s more, so a process that dies mid-delivery leaves
    /// it to another that long after the claim.
    pub timeout_seconds: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            url: None,
            secret: None,
            allow_private: false,
            retry_seconds: vec![5, 300, 1800, 7200, 18000, 36000, 36000],
            timeout_seconds: 10,
        }
    }
}

/// Most retries, and the longest wait before one (a week).
const MAX_RETRIES: usize = 32;
const MAX_RETRY_WAIT: u64 = 7 * 24 * 3600;

/// The webhooks a configuration asks for, checked.
#[derive(Clone)]
pub struct Webhooks {
    url: reqwest::Url,
    signer: Signer,
    allow_private: bool,
    retry_after: Vec<Duration>,
    timeout: Duration,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("url", &self.url.as_str())
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl Webhooks {
    /// `None` without a URL; an error for a URL or secret that cannot work.
    pub fn from_config(config: &WebhooksConfig) -> Result<Option<Self>, Error> {
        let Some(url) = &config.url else {
            if config.secret.is_some() {
                return Err(invalid("webhooks.secret is set but webhooks.url is not"));
            }
            return Ok(None);
        };
        let url = reqwest::Url::parse(url)
            .map_err(|e| invalid(&format!("webhooks.url is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(invalid("webhooks.url must be an http or https URL"));
        }
        let secret = config
            .secret
            .as_deref()
            .ok_or_else(|| invalid("webhooks.url needs webhooks.secret (whsec_…)"))?;
        let signer = Signer::new(secret)?;
        if config.retry_seconds.len() > MAX_RETRIES
            || config.retry_seconds.iter().any(|s| *s > MAX_RETRY_WAIT)
        {
            return Err(invalid(
                "webhooks.retry_seconds takes at most 32 waits of at most a week each",
            ));
        }
        if !(1..=60).contains(&config.timeout_seconds) {
            return Err(invalid("webhooks.timeout_seconds must be 1 to 60"));
        }
        if !config.allow_private
            && let Some(ip) = address::literal(&url)
            && !address::public(ip)
        {
            return Err(invalid(&format!(
                "webhooks.url points at {ip}, a loopback, private or link-local address; set webhooks.allow_private = true to allow it"
            )));
        }
        Ok(Some(Self {
            url,
            signer,
            allow_private: config.allow_private,
            retry_after: config
                .retry_seconds
                .iter()
                .map(|s| Duration::from_secs(*s))
                .collect(),
            timeout: Duration::from_secs(config.timeout_seconds),
        }))
    }
}

fn invalid(why: &str) -> Error {
    Error::Config(why.to_owned())
}

/// Signs messages with a Standard Webhooks secret.
#[derive(Clone)]
pub struct Signer {
    key: Vec<u8>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // (Never the key.)
        f.debug_struct("Signer").finish_non_exhaustive()
    }
}

impl Signer {
    /// The signer of `secret` (`whsec_` and base64).
    pub fn new(secret: &str) -> Result<Self, Error> {
        let encoded = secret
            .strip_prefix("whsec_")
            .ok_or_else(|| invalid("webhooks.secret must start with whsec_"))?;
        let key = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| invalid("webhooks.secret must be whsec_ then base64"))?;
        if !(24..=64).contains(&key.len()) {
            return Err(invalid(
                "webhooks.secret must hold 24 to 64 bytes (whsec_ then their base64)",
            ));
        }
        Ok(Self { key })
    }

    /// The `webhook-signature` header of a message: `v1,` and the base64 of
    /// HMAC-SHA256 over `id.timestamp.body`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &str) -> String {
        // (Any key length is valid for HMAC.)
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            return String::new();
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body.as_bytes());
        let tag = mac.finalize().into_bytes();
        format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(tag)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specifications_example_signature() {
        // The Standard Webhooks specification's test vector.
        let signer = Signer::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            signer.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                r#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn configurations_that_cannot_work_are_refused() {
        let config = |url: &str, secret: Option<&str>, allow_private| WebhooksConfig {
            url: Some(url.to_owned()),
            secret: secret.map(str::to_owned),
            allow_private,
            ..WebhooksConfig::default()
        };
        let secret = Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        assert!(
            Webhooks::from_config(&WebhooksConfig::default())
                .unwrap()
                .is_none()
        );
        for (bad, why) in [
            (
                config("https://hooks.example.com/x", None, false),
                "needs webhooks.secret",
            ),
            (
                config("https://hooks.example.com/x", Some("MfKQ9r8"), false),
                "whsec_",
            ),
            (
                config("https://hooks.example.com/x", Some("whsec_c2hvcnQ="), false),
                "24 to 64",
            ),
            (
                config("ftp://hooks.example.com/x", secret, false),
                "http or https",
            ),
            (
                config("http://127.0.0.1:9/x", secret, false),
                "allow_private",
            ),
            (config("http://[::1]:9/x", secret, false), "allow_private"),
            (
                WebhooksConfig {
                    timeout_seconds: 0,
                    ..config("https://hooks.example.com/x", secret, false)
                },
                "timeout_seconds must be 1 to 60",
            ),
            (config("http://10.1.2.3/x", secret, false), "allow_private"),
            (
                config("http://169.254.169.254/latest", secret, false),
                "allow_private",
            ),
        ] {
            let refused = Webhooks::from_config(&bad).unwrap_err().to_string();
            assert!(refused.contains(why), "{bad:?}: {refused}");
        }
        assert!(
            Webhooks::from_config(&config("http://127.0.0.1:9/x", secret, true))
                .unwrap()
                .is_some()
        );
        assert!(
            Webhooks::from_config(&config("https://hooks.example.com/x", secret, false))
                .unwrap()
                .is_some()
        );
    }
}
