//! Who is asking: HS256 JWT bearer tokens (`sub` = user id, `exp` enforced),
//! as Supabase and most identity providers issue them — or, with no secret
//! configured, the one local user.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// The user of a service without authentication.
pub const LOCAL_USER: &str = "local";

/// How requests are authenticated.
#[derive(Clone, Default)]
pub struct Auth {
    secret: Option<Vec<u8>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("jwt", &self.secret.is_some())
            .finish()
    }
}

impl Auth {
    /// No authentication: every request is [`LOCAL_USER`]'s.
    pub fn none() -> Self {
        Self { secret: None }
    }

    /// HS256 JWTs signed with `secret`.
    pub fn jwt(secret: impl Into<Vec<u8>>) -> Self {
        Self {
            secret: Some(secret.into()),
        }
    }

    /// Whether tokens are required.
    pub fn is_enabled(&self) -> bool {
        self.secret.is_some()
    }

    /// The user an `Authorization` header value names, or why not.
    pub fn user(&self, authorization: Option<&str>, now_s: i64) -> Result<String, &'static str> {
        let Some(secret) = &self.secret else {
            return Ok(LOCAL_USER.to_owned());
        };
        let token = authorization
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .ok_or("missing bearer token")?
            .trim();
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("malformed token");
        };
        let decode = |part: &str| URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).ok();
        let header: Value = decode(header)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or("malformed token")?;
        // Only HS256: a token may not choose `none` or another algorithm.
        if header.get("alg").and_then(Value::as_str) != Some("HS256") {
            return Err("unsupported token algorithm");
        }
        let signature = decode(signature).ok_or("malformed token")?;
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
            unreachable!("HMAC takes keys of any length")
        };
        let signed = &token[..token.len() - token.rsplit('.').next().map_or(0, |s| s.len() + 1)];
        mac.update(signed.as_bytes());
        mac.verify_slice(&signature)
            .map_err(|_| "invalid token signature")?;
        let claims: Value = decode(payload)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or("malformed token")?;
        let exp = claims
            .get("exp")
            .and_then(Value::as_i64)
            .ok_or("token has no exp")?;
        if exp <= now_s {
            return Err("token expired");
        }
        match claims.get("sub").and_then(Value::as_str) {
            Some(sub) if !sub.is_empty() => Ok(sub.to_owned()),
            _ => Err("token has no sub"),
        }
    }
}

/// An HS256 token for `sub` expiring at `exp` (tests and tooling).
pub fn sign_jwt(secret: &[u8], sub: &str, exp: i64) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(serde_json::json!({"sub": sub, "exp": exp}).to_string());
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        unreachable!("HMAC takes keys of any length")
    };
    mac.update(format!("{header}.{payload}").as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{header}.{payload}.{signature}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_for_signature_algorithm_expiry_and_subject() {
        let auth = Auth::jwt(b"s3cret".to_vec());
        let good = sign_jwt(b"s3cret", "alice", 2000);
        assert_eq!(
            auth.user(Some(&format!("Bearer {good}")), 1000),
            Ok("alice".into())
        );
        assert_eq!(
            auth.user(Some(&format!("Bearer {good}")), 2000),
            Err("token expired")
        );
        assert_eq!(auth.user(None, 1000), Err("missing bearer token"));
        let foreign = sign_jwt(b"other", "alice", 2000);
        assert_eq!(
            auth.user(Some(&format!("Bearer {foreign}")), 1000),
            Err("invalid token signature")
        );
        let none_alg = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(br#"{"sub":"alice","exp":9999}"#)
        );
        assert_eq!(
            auth.user(Some(&format!("Bearer {none_alg}")), 1000),
            Err("unsupported token algorithm")
        );
        // A payload swapped under a valid signature fails.
        let mut parts: Vec<&str> = good.split('.').collect();
        let evil = URL_SAFE_NO_PAD.encode(br#"{"sub":"bob","exp":2000}"#);
        parts[1] = &evil;
        assert_eq!(
            auth.user(Some(&format!("Bearer {}", parts.join("."))), 1000),
            Err("invalid token signature")
        );
        assert_eq!(Auth::none().user(None, 0), Ok(LOCAL_USER.into()));
    }
}
