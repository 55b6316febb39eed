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

use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::Value;

mod jwks;

use jwks::Jwks;

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
mod tests;
