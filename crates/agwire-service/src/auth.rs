//! Who is asking: JWT bearer tokens (`sub` = user id, `exp` required),
//! verified by the maintained `jsonwebtoken` crate — HS256 with a shared
//! secret, and/or RS256/RS384/RS512/PS256/ES256/ES384/EdDSA with the keys an
//! identity provider publishes as a JWKS (Supabase, Auth0, Clerk, Keycloak).
//! With neither configured, every request is the one local user's.
//!
//! `aud` and `iss` are checked when an audience and an issuer are
//! configured (`aud` a string or an array naming the audience). Without an
//! audience, a JWKS accepts every token its provider signs, for any
//! application: [`Auth::warnings`] says so at start-up. `sub` must be at
//! most [`MAX_SUBJECT_BYTES`] bytes without control characters (a NUL in a
//! user id fails every PostgreSQL write of that user).
//!
//! The JWKS is fetched when first needed and cached; the set held is read
//! through a lock held only to clone an `Arc`, so a token whose key is held
//! never waits for a fetch. The rules:
//! - At most one fetch runs at a time; requests that need one while it runs
//!   wait for its result (the first fetch, when no key is held yet, is
//!   shared by every request that came for it).
//! - A token naming a key id the set lacks refetches and waits for the
//!   result (a key rotation needs no restart: the first token signed with
//!   the new key gets in), at most once per [`JWKS_MIN_REFRESH`] since the
//!   last fetch began; within that window it is refused at once
//!   ([`AuthError::UnknownKey`]) without a fetch, so a flood of tokens with
//!   made-up key ids cannot turn into a flood of requests to the provider.
//! - The set goes stale after its `Cache-Control: max-age` (else
//!   [`JWKS_TTL`]); a stale set is still used, while a refresh (at most one
//!   per window) runs in the background.
//! - A failed fetch keeps the set held, for as long as fetches fail: a
//!   provider that is down or slow does not lock everyone out. Only while no
//!   fetch has ever succeeded are JWKS tokens refused as
//!   [`AuthError::KeysUnavailable`] (then, too, one attempt per window).

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::Value;

/// The user of a service without authentication.
pub const LOCAL_USER: &str = "local";

/// Clock skew tolerated on `exp` and `nbf`.
pub const LEEWAY_SECONDS: i64 = 30;
/// How long a JWKS is kept when its answer does not say.
pub const JWKS_TTL: Duration = Duration::from_secs(600);
/// The least time between two fetches of the JWKS.
pub const JWKS_MIN_REFRESH: Duration = Duration::from_secs(10);
/// The longest `sub` accepted, in bytes of UTF-8 (every identity
/// provider's ids are far shorter: UUIDs, `auth0|…`, `user_…`).
pub const MAX_SUBJECT_BYTES: usize = 255;
/// How long one fetch of the JWKS may take.
const JWKS_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a request is not authenticated (the 401's detail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No `Authorization: Bearer` header.
    #[error("missing bearer token")]
    Missing,
    /// Not a JWT.
    #[error("malformed token")]
    Malformed,
    /// An algorithm no configured key verifies (`none` included).
    #[error("unsupported token algorithm")]
    Algorithm,
    /// A key id the JWKS does not hold (after a refetch, or within the
    /// window after the last one).
    #[error("unknown token signing key")]
    UnknownKey,
    /// The JWKS has never been fetched successfully.
    #[error("token signing keys unavailable")]
    KeysUnavailable,
    /// The signature does not verify.
    #[error("invalid token signature")]
    Signature,
    /// No `exp` claim.
    #[error("token has no exp")]
    NoExpiry,
    /// `exp` has passed.
    #[error("token expired")]
    Expired,
    /// `nbf` is still to come.
    #[error("token not yet valid")]
    NotYetValid,
    /// `aud` does not name the configured audience.
    #[error("token audience not accepted")]
    Audience,
    /// `iss` is not the configured issuer.
    #[error("token issuer not accepted")]
    Issuer,
    /// No `sub` claim.
    #[error("token has no sub")]
    NoSubject,
    /// A `sub` longer than [`MAX_SUBJECT_BYTES`] or with a control
    /// character (NUL among them): not a user id the stores can keep.
    #[error("token sub not accepted")]
    InvalidSubject,
}

/// How requests are authenticated.
#[derive(Clone, Default)]
pub struct Auth {
    /// `None`: no authentication.
    verifier: Option<Arc<Verifier>>,
}

#[derive(Default)]
struct Verifier {
    hs256: Option<DecodingKey>,
    jwks: Option<Jwks>,
    audience: Option<String>,
    issuer: Option<String>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verifier = self.verifier.as_deref();
        f.debug_struct("Auth")
            .field("hs256", &verifier.is_some_and(|v| v.hs256.is_some()))
            .field(
                "jwks",
                &verifier.and_then(|v| v.jwks.as_ref().map(|j| &j.url)),
            )
            .field("audience", &verifier.and_then(|v| v.audience.as_ref()))
            .field("issuer", &verifier.and_then(|v| v.issuer.as_ref()))
            .finish()
    }
}

impl Auth {
    /// No authentication: every request is [`LOCAL_USER`]'s.
    pub fn none() -> Self {
        Self::default()
    }

    /// HS256 JWTs signed with `secret`.
    pub fn jwt(secret: impl Into<Vec<u8>>) -> Self {
        Self::none().with_secret(secret)
    }

    /// Also (or only) accepts HS256 tokens signed with `secret`.
    pub fn with_secret(self, secret: impl Into<Vec<u8>>) -> Self {
        let secret = secret.into();
        self.change(|v| v.hs256 = Some(DecodingKey::from_secret(&secret)))
    }

    /// Accepts tokens signed with the keys published at `url` (a JWKS).
    pub fn with_jwks(self, url: impl Into<String>) -> Self {
        let jwks = Jwks::new(url.into(), JWKS_MIN_REFRESH);
        self.change(|v| v.jwks = Some(jwks))
    }

    /// The least time between two fetches of the JWKS (default
    /// [`JWKS_MIN_REFRESH`]); call after [`Auth::with_jwks`].
    pub fn with_jwks_min_refresh(self, min_refresh: Duration) -> Self {
        self.change(|v| {
            if let Some(jwks) = &mut v.jwks {
                jwks.min_refresh = min_refresh;
            }
        })
    }

    /// Tokens must name `audience` in `aud` (a string or an array of them;
    /// Supabase issues `"authenticated"`).
    pub fn with_audience(self, audience: impl Into<String>) -> Self {
        let audience = audience.into();
        self.change(|v| v.audience = Some(audience))
    }

    /// Tokens must carry exactly this `iss`.
    pub fn with_issuer(self, issuer: impl Into<String>) -> Self {
        let issuer = issuer.into();
        self.change(|v| v.issuer = Some(issuer))
    }

    fn change(self, edit: impl FnOnce(&mut Verifier)) -> Self {
        let mut verifier = match self.verifier {
            Some(shared) => Arc::try_unwrap(shared).unwrap_or_else(|shared| shared.duplicate()),
            None => Verifier::default(),
        };
        edit(&mut verifier);
        Self {
            verifier: Some(Arc::new(verifier)),
        }
    }

    /// What this configuration leaves open, one sentence each, for the
    /// log at start-up: a JWKS without an audience accepts tokens its
    /// provider issued to any other application; without an issuer, `iss`
    /// is not checked.
    pub fn warnings(&self) -> Vec<&'static str> {
        let Some(verifier) = &self.verifier else {
            return Vec::new();
        };
        let mut warnings = Vec::new();
        if verifier.jwks.is_some() && verifier.audience.is_none() {
            warnings.push(
                "auth: a JWKS (auth.jwks_url) is configured without an audience (auth.audience, --jwt-audience): tokens the same identity provider issued to ANY other application are accepted; set the audience your tokens carry (Supabase: authenticated)",
            );
        }
        if verifier.jwks.is_some() && verifier.issuer.is_none() {
            warnings.push(
                "auth: a JWKS is configured without an issuer (auth.issuer, --jwt-issuer): the tokens' iss is not checked; safe only when these keys sign for this one issuer, set it to be sure",
            );
        }
        warnings
    }

    /// Whether tokens are required.
    pub fn is_enabled(&self) -> bool {
        self.verifier.is_some()
    }

    /// The user an `Authorization` header value names, or why not, at
    /// `now_s` (seconds since the epoch).
    pub async fn user(&self, authorization: Option<&str>, now_s: i64) -> Result<String, AuthError> {
        let Some(verifier) = &self.verifier else {
            return Ok(LOCAL_USER.to_owned());
        };
        let token = authorization
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .ok_or(AuthError::Missing)?
            .trim();
        verifier.verify(token, now_s).await
    }
}

impl Verifier {
    /// A copy for a builder call on a shared verifier (the JWKS cache is
    /// shared, not copied).
    fn duplicate(&self) -> Self {
        Self {
            hs256: self.hs256.clone(),
            jwks: self.jwks.clone(),
            audience: self.audience.clone(),
            issuer: self.issuer.clone(),
        }
    }

    async fn verify(&self, token: &str, now_s: i64) -> Result<String, AuthError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| header_error(token))?;
        let key = match header.alg {
            Algorithm::HS256 => self.hs256.clone().ok_or(AuthError::Algorithm)?,
            // The other HMACs are not offered: one shared-secret algorithm.
            Algorithm::HS384 | Algorithm::HS512 => return Err(AuthError::Algorithm),
            alg => {
                let jwks = self.jwks.as_ref().ok_or(AuthError::Algorithm)?;
                jwks.key(header.kid.as_deref(), alg).await?
            }
        };
        // `exp`/`nbf` are checked below against `now_s` (a clock the caller
        // controls) with our leeway; the crate checks the signature, the
        // algorithm against the key, `aud` and `iss`.
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = self.audience.is_some();
        validation.required_spec_claims.clear();
        if let Some(audience) = &self.audience {
            validation.set_audience(&[audience]);
        }
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            validation.required_spec_claims.insert("iss".into());
        }
        if self.audience.is_some() {
            validation.required_spec_claims.insert("aud".into());
        }
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map_err(|error| {
                use jsonwebtoken::errors::ErrorKind;
                match error.kind() {
                    ErrorKind::InvalidSignature => AuthError::Signature,
                    ErrorKind::InvalidAudience => AuthError::Audience,
                    ErrorKind::InvalidIssuer => AuthError::Issuer,
                    ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => AuthError::Audience,
                    ErrorKind::MissingRequiredClaim(claim) if claim == "iss" => AuthError::Issuer,
                    ErrorKind::InvalidAlgorithm | ErrorKind::InvalidKeyFormat => {
                        AuthError::Algorithm
                    }
                    _ => AuthError::Malformed,
                }
            })?
            .claims;
        let exp = claims
            .get("exp")
            .and_then(Value::as_i64)
            .ok_or(AuthError::NoExpiry)?;
        if exp + LEEWAY_SECONDS <= now_s {
            return Err(AuthError::Expired);
        }
        if claims
            .get("nbf")
            .and_then(Value::as_i64)
            .is_some_and(|nbf| nbf - LEEWAY_SECONDS > now_s)
        {
            return Err(AuthError::NotYetValid);
        }
        match claims.get("sub").and_then(Value::as_str) {
            None | Some("") => Err(AuthError::NoSubject),
            Some(sub) if sub.len() > MAX_SUBJECT_BYTES || sub.chars().any(char::is_control) => {
                Err(AuthError::InvalidSubject)
            }
            Some(sub) => Ok(sub.to_owned()),
        }
    }
}

/// A provider's published keys, cached; clones share the cache.
#[derive(Clone)]
struct Jwks {
    url: String,
    min_refresh: Duration,
    client: reqwest::Client,
    shared: Arc<SharedKeys>,
}

/// The cache of a [`Jwks`] and its clones.
#[derive(Default)]
struct SharedKeys {
    /// The last good key set (`None` until a fetch succeeded). Locked only
    /// to clone or replace the `Arc`, never across an `.await`: a token
    /// whose key is held never waits for a fetch.
    current: std::sync::RwLock<Option<Arc<KeySet>>>,
    /// Held for the whole of a fetch, so at most one runs at a time;
    /// requests that need its result wait on it.
    flight: Arc<tokio::sync::Mutex<Flight>>,
    /// Fetches ended (successful or not), bumped after `current` is
    /// replaced: a request that waited for `flight` tells from it whether a
    /// fetch ran meanwhile, and takes its result instead of fetching again.
    ended: AtomicU64,
}

/// What the fetch lock guards.
#[derive(Default)]
struct Flight {
    /// When the last fetch began (successful or not).
    began: Option<Instant>,
}

impl Flight {
    /// Whether a fetch may begin at `now`: never within `min_refresh` of
    /// the last one.
    fn due(&self, now: Instant, min_refresh: Duration) -> bool {
        self.began
            .is_none_or(|began| now.duration_since(began) >= min_refresh)
    }
}

/// One fetched JWKS.
struct KeySet {
    /// Keys by `kid`, each with the algorithm it is for (when the JWK says).
    keys: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    /// Keys without a `kid` (a token without one tries them all).
    anonymous: Vec<(DecodingKey, Option<Algorithm>)>,
    /// When the set goes stale (a refresh is due; it is still used).
    expires: Instant,
}

impl SharedKeys {
    fn current(&self) -> Option<Arc<KeySet>> {
        // A poisoned lock still holds a whole `Option<Arc>`: writers only
        // assign one.
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn replace(&self, set: KeySet) {
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(set));
    }
}

impl Jwks {
    fn new(url: String, min_refresh: Duration) -> Self {
        let client = reqwest::Client::builder()
            .timeout(JWKS_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self {
            url,
            min_refresh,
            client,
            shared: Arc::default(),
        }
    }

    /// The key that verifies a token of `alg` with key id `kid`.
    ///
    /// A key in the set held is answered at once, even from a stale set
    /// (whose refresh it starts in the background). Otherwise the request
    /// refetches and waits for the result, or shares the fetch already
    /// running; within `min_refresh` of the last fetch it is answered at
    /// once from the set held.
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, AuthError> {
        // Read before the set (a fetch replaces the set, then bumps this):
        // should the set read below miss a key a fetch just brought in,
        // `refetch` sees that a fetch ended since, and takes its set rather
        // than fetching again.
        let ended = self.shared.ended.load(Ordering::Acquire);
        if let Some(set) = self.shared.current()
            && let Some(key) = set.find(kid, alg)
        {
            if set.expires <= Instant::now() {
                self.refresh_in_background();
            }
            return Ok(key);
        }
        // Not in the set held (or none yet): the provider may have rotated.
        match self.refetch(ended).await {
            Some(set) => set.find(kid, alg).ok_or(AuthError::UnknownKey),
            None => Err(AuthError::KeysUnavailable),
        }
    }

    /// The set after the fetch that ran since `ended` was read, or after
    /// one this request runs if none did and one is due; else, at once, the
    /// set held.
    async fn refetch(&self, ended: u64) -> Option<Arc<KeySet>> {
        // Waits only while a fetch runs (others hold it just to look).
        let mut flight = Arc::clone(&self.shared.flight).lock_owned().await;
        let ran_meanwhile = self.shared.ended.load(Ordering::Acquire) != ended;
        let now = Instant::now();
        if !ran_meanwhile && flight.due(now, self.min_refresh) {
            flight.began = Some(now);
            let fetch = self.fetch_holding(flight);
            // On a task of its own: a client that goes away does not cancel
            // the fetch that others wait for.
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    // An error is the fetch's panic: the set stays as it was.
                    let _ = runtime.spawn(fetch).await;
                }
                Err(_) => fetch.await,
            }
        }
        self.shared.current()
    }

    /// Starts a refresh of a stale set unless one runs or one began within
    /// `min_refresh`; the tokens meanwhile are checked against the stale set.
    fn refresh_in_background(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Ok(mut flight) = Arc::clone(&self.shared.flight).try_lock_owned() else {
            return;
        };
        let now = Instant::now();
        if !flight.due(now, self.min_refresh) {
            return;
        }
        flight.began = Some(now);
        runtime.spawn(self.fetch_holding(flight));
    }

    /// Fetches the set and keeps it if it is good, holding `flight` until
    /// then. A failed fetch keeps the set held.
    fn fetch_holding(
        &self,
        flight: tokio::sync::OwnedMutexGuard<Flight>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let this = self.clone();
        async move {
            if let Some(set) = this.fetch().await {
                this.shared.replace(set);
            }
            this.shared.ended.fetch_add(1, Ordering::Release);
            drop(flight);
        }
    }

    /// One fetch of the set, `None` (logged) when it fails.
    async fn fetch(&self) -> Option<KeySet> {
        let began = Instant::now();
        let answer = match self.client.get(&self.url).send().await {
            Ok(answer) if answer.status().is_success() => answer,
            Ok(answer) => {
                tracing::warn!(url = self.url, status = %answer.status(), "could not fetch the JWKS; the keys held stay in use");
                return None;
            }
            Err(error) => {
                tracing::warn!(url = self.url, %error, "could not fetch the JWKS; the keys held stay in use");
                return None;
            }
        };
        let ttl = answer
            .headers()
            .get(reqwest::header::CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .and_then(max_age)
            .unwrap_or(JWKS_TTL);
        let set: JwkSet = match answer.json().await {
            Ok(set) => set,
            Err(error) => {
                tracing::warn!(url = self.url, %error, "the JWKS is not a JWK set; the keys held stay in use");
                return None;
            }
        };
        let mut keys = HashMap::new();
        let mut anonymous = Vec::new();
        for jwk in &set.keys {
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                // Keys of kinds we do not verify (e.g. encryption keys).
                continue;
            };
            let alg = jwk
                .common
                .key_algorithm
                .and_then(|a| Algorithm::from_str(&a.to_string()).ok());
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.insert(kid.clone(), (key, alg));
                }
                None => anonymous.push((key, alg)),
            }
        }
        tracing::info!(
            url = self.url,
            keys = keys.len() + anonymous.len(),
            "fetched the JWKS"
        );
        Some(KeySet {
            keys,
            anonymous,
            expires: began + ttl,
        })
    }
}

impl KeySet {
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        // A key declared for one algorithm is not used for another.
        let fits = |(key, declared): &(DecodingKey, Option<Algorithm>)| {
            declared.is_none_or(|d| d == alg).then(|| key.clone())
        };
        match kid {
            Some(kid) => self.keys.get(kid).and_then(fits),
            None if self.keys.is_empty() && self.anonymous.len() == 1 => {
                self.anonymous.first().and_then(fits)
            }
            None => None,
        }
    }
}

/// Why a token's header could not be read: an algorithm we do not know
/// (`none` among them) is told apart from a token that is not a JWT.
fn header_error(token: &str) -> AuthError {
    use base64::Engine;
    let names_an_alg = token
        .split('.')
        .next()
        .and_then(|h| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(h)
                .ok()
        })
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .is_some_and(|header| header.get("alg").is_some_and(Value::is_string));
    if names_an_alg {
        AuthError::Algorithm
    } else {
        AuthError::Malformed
    }
}

/// `max-age` of a `Cache-Control` value.
fn max_age(value: &str) -> Option<Duration> {
    value
        .split(',')
        .filter_map(|d| d.trim().strip_prefix("max-age="))
        .find_map(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// An HS256 token for `sub` expiring at `exp` (tests and tooling).
pub fn sign_jwt(secret: &[u8], sub: &str, exp: i64) -> String {
    sign_claims(secret, &serde_json::json!({"sub": sub, "exp": exp}))
}

/// An HS256 token carrying `claims` (tests and tooling).
pub fn sign_claims(secret: &[u8], claims: &Value) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use super::*;

    #[tokio::test]
    async fn tokens_are_checked_for_signature_algorithm_expiry_and_subject() {
        let auth = Auth::jwt(b"s3cret".to_vec());
        let good = sign_jwt(b"s3cret", "alice", 2000);
        let bearer = |t: &str| format!("Bearer {t}");
        assert_eq!(
            auth.user(Some(&bearer(&good)), 1000).await,
            Ok("alice".into())
        );
        // Within the leeway still valid; past it expired.
        assert_eq!(
            auth.user(Some(&bearer(&good)), 2029).await,
            Ok("alice".into())
        );
        assert_eq!(
            auth.user(Some(&bearer(&good)), 2030).await,
            Err(AuthError::Expired)
        );
        assert_eq!(auth.user(None, 1000).await, Err(AuthError::Missing));
        let foreign = sign_jwt(b"other", "alice", 2000);
        assert_eq!(
            auth.user(Some(&bearer(&foreign)), 1000).await,
            Err(AuthError::Signature)
        );
        let none_alg = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(br#"{"sub":"alice","exp":9999}"#)
        );
        assert_eq!(
            auth.user(Some(&bearer(&none_alg)), 1000).await,
            Err(AuthError::Algorithm)
        );
        // RS256 without a JWKS configured: no key for it.
        let rs = format!(
            "{}.{}.c2ln",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256"}"#),
            URL_SAFE_NO_PAD.encode(br#"{"sub":"alice","exp":9999}"#)
        );
        assert_eq!(
            auth.user(Some(&bearer(&rs)), 1000).await,
            Err(AuthError::Algorithm)
        );
        // A payload swapped under a valid signature fails.
        let mut parts: Vec<&str> = good.split('.').collect();
        let evil = URL_SAFE_NO_PAD.encode(br#"{"sub":"bob","exp":2000}"#);
        parts[1] = &evil;
        assert_eq!(
            auth.user(Some(&bearer(&parts.join("."))), 1000).await,
            Err(AuthError::Signature)
        );
        let no_exp = sign_claims(b"s3cret", &serde_json::json!({"sub": "alice"}));
        assert_eq!(
            auth.user(Some(&bearer(&no_exp)), 1000).await,
            Err(AuthError::NoExpiry)
        );
        let no_sub = sign_claims(b"s3cret", &serde_json::json!({"exp": 2000}));
        assert_eq!(
            auth.user(Some(&bearer(&no_sub)), 1000).await,
            Err(AuthError::NoSubject)
        );
        assert_eq!(
            auth.user(Some("Bearer not.a.jwt"), 1000).await,
            Err(AuthError::Malformed)
        );
        assert_eq!(Auth::none().user(None, 0).await, Ok(LOCAL_USER.into()));
    }

    #[tokio::test]
    async fn audience_issuer_and_not_before_are_enforced_when_configured() {
        let supabase = serde_json::json!({
            "sub": "alice", "exp": 2000, "aud": "authenticated",
            "iss": "https://x.supabase.co/auth/v1", "role": "authenticated"
        });
        let bearer = |claims: &Value| format!("Bearer {}", sign_claims(b"k", claims));
        let auth = Auth::jwt(b"k".to_vec())
            .with_audience("authenticated")
            .with_issuer("https://x.supabase.co/auth/v1");
        assert_eq!(
            auth.user(Some(&bearer(&supabase)), 1000).await,
            Ok("alice".into())
        );
        let mut listed = supabase.clone();
        listed["aud"] = serde_json::json!(["other", "authenticated"]);
        assert_eq!(
            auth.user(Some(&bearer(&listed)), 1000).await,
            Ok("alice".into())
        );
        let mut wrong_aud = supabase.clone();
        wrong_aud["aud"] = "anon".into();
        assert_eq!(
            auth.user(Some(&bearer(&wrong_aud)), 1000).await,
            Err(AuthError::Audience)
        );
        let mut no_aud = supabase.clone();
        no_aud.as_object_mut().unwrap().remove("aud");
        assert_eq!(
            auth.user(Some(&bearer(&no_aud)), 1000).await,
            Err(AuthError::Audience)
        );
        let mut wrong_iss = supabase.clone();
        wrong_iss["iss"] = "https://evil.example".into();
        assert_eq!(
            auth.user(Some(&bearer(&wrong_iss)), 1000).await,
            Err(AuthError::Issuer)
        );
        let mut early = supabase;
        early["nbf"] = 1500.into();
        assert_eq!(
            auth.user(Some(&bearer(&early)), 1000).await,
            Err(AuthError::NotYetValid)
        );
        // Without the checks configured, the same claims pass.
        assert_eq!(
            Auth::jwt(b"k".to_vec())
                .user(Some(&bearer(&wrong_aud)), 1000)
                .await,
            Ok("alice".into())
        );
    }

    #[tokio::test]
    async fn a_sub_with_control_characters_or_too_long_is_refused() {
        let auth = Auth::jwt(b"s3cret".to_vec());
        let user = |sub: &str| {
            let token = sign_jwt(b"s3cret", sub, 2000);
            let auth = auth.clone();
            async move { auth.user(Some(&format!("Bearer {token}")), 1000).await }
        };
        // A NUL would make every PostgreSQL write of this user fail.
        assert_eq!(user("alice\0").await, Err(AuthError::InvalidSubject));
        assert_eq!(user("\0").await, Err(AuthError::InvalidSubject));
        for control in ['\n', '\r', '\t', '\u{1b}', '\u{7f}', '\u{85}'] {
            assert_eq!(
                user(&format!("ali{control}ce")).await,
                Err(AuthError::InvalidSubject),
                "{control:?}"
            );
        }
        let longest = "a".repeat(MAX_SUBJECT_BYTES);
        assert_eq!(user(&longest).await, Ok(longest.clone()));
        assert_eq!(
            user(&format!("{longest}a")).await,
            Err(AuthError::InvalidSubject)
        );
        // Bytes, not characters: 128 two-byte characters are 256 bytes.
        assert_eq!(user(&"é".repeat(128)).await, Err(AuthError::InvalidSubject));
        // Ids as providers issue them pass, spaces and non-ASCII included.
        for sub in [
            "auth0|64f1c2e9a1b2c3d4e5f60718",
            "user_2abcDEF",
            "0b6f6f8e-3a1c-4c1e-9d2a-7b1f0e3c5a9d",
            "Zoë Dupont",
        ] {
            assert_eq!(user(sub).await, Ok(sub.to_owned()));
        }
    }

    #[test]
    fn a_jwks_without_audience_or_issuer_is_warned_about() {
        let jwks = || Auth::none().with_jwks("https://id.example/jwks.json");
        let warnings = jwks().warnings();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains("without an audience") && warnings[0].contains("ANY other"),
            "{warnings:?}"
        );
        assert!(warnings[1].contains("without an issuer"), "{warnings:?}");
        let warnings = jwks().with_audience("authenticated").warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("without an issuer"), "{warnings:?}");
        assert!(
            jwks()
                .with_audience("authenticated")
                .with_issuer("https://id.example")
                .warnings()
                .is_empty()
        );
        // A shared secret is the application's own: no provider-wide keys.
        assert!(Auth::jwt(b"s3cret".to_vec()).warnings().is_empty());
        assert!(Auth::none().warnings().is_empty());
    }

    #[test]
    fn max_age_is_read_from_cache_control() {
        assert_eq!(
            max_age("public, max-age=300, must-revalidate"),
            Some(Duration::from_secs(300))
        );
        assert_eq!(max_age("no-cache"), None);
    }
}
