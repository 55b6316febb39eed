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
    audience: Option<String>,
    issuer: Option<String>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("jwt", &self.secret.is_some())
            .field("audience", &self.audience)
            .field("issuer", &self.issuer)
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
        Self {
            secret: Some(secret.into()),
            ..Self::default()
        }
    }

    /// Tokens must name `audience` in `aud` (a string or an array of them;
    /// Supabase issues `"authenticated"`).
    pub fn with_audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Tokens must carry exactly this `iss`.
    pub fn with_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
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
        if claims
            .get("nbf")
            .and_then(Value::as_i64)
            .is_some_and(|nbf| nbf > now_s)
        {
            return Err("token not yet valid");
        }
        if let Some(audience) = &self.audience {
            let named = match claims.get("aud") {
                Some(Value::String(aud)) => aud == audience,
                Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
                _ => false,
            };
            if !named {
                return Err("token audience not accepted");
            }
        }
        if let Some(issuer) = &self.issuer
            && claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str())
        {
            return Err("token issuer not accepted");
        }
        match claims.get("sub").and_then(Value::as_str) {
            Some(sub) if !sub.is_empty() => Ok(sub.to_owned()),
            _ => Err("token has no sub"),
        }
    }
}

/// An HS256 token for `sub` expiring at `exp` (tests and tooling).
pub fn sign_jwt(secret: &[u8], sub: &str, exp: i64) -> String {
    sign_claims(secret, &serde_json::json!({"sub": sub, "exp": exp}))
}

/// An HS256 token carrying `claims` (tests and tooling).
pub fn sign_claims(secret: &[u8], claims: &Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
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

    #[test]
    fn audience_issuer_and_not_before_are_enforced_when_configured() {
        let supabase = serde_json::json!({
            "sub": "alice", "exp": 2000, "aud": "authenticated",
            "iss": "https://x.supabase.co/auth/v1", "role": "authenticated"
        });
        let bearer = |claims: &Value| format!("Bearer {}", sign_claims(b"k", claims));
        let auth = Auth::jwt(b"k".to_vec())
            .with_audience("authenticated")
            .with_issuer("https://x.supabase.co/auth/v1");
        assert_eq!(
            auth.user(Some(&bearer(&supabase)), 1000),
            Ok("alice".into())
        );
        let mut listed = supabase.clone();
        listed["aud"] = serde_json::json!(["other", "authenticated"]);
        assert_eq!(auth.user(Some(&bearer(&listed)), 1000), Ok("alice".into()));
        let mut wrong_aud = supabase.clone();
        wrong_aud["aud"] = "anon".into();
        assert_eq!(
            auth.user(Some(&bearer(&wrong_aud)), 1000),
            Err("token audience not accepted")
        );
        let mut no_aud = supabase.clone();
        no_aud.as_object_mut().unwrap().remove("aud");
        assert_eq!(
            auth.user(Some(&bearer(&no_aud)), 1000),
            Err("token audience not accepted")
        );
        let mut wrong_iss = supabase.clone();
        wrong_iss["iss"] = "https://evil.example".into();
        assert_eq!(
            auth.user(Some(&bearer(&wrong_iss)), 1000),
            Err("token issuer not accepted")
        );
        let mut early = supabase;
        early["nbf"] = 1500.into();
        assert_eq!(
            auth.user(Some(&bearer(&early)), 1000),
            Err("token not yet valid")
        );
        // Without the checks configured, the same claims pass.
        assert_eq!(
            Auth::jwt(b"k".to_vec()).user(Some(&bearer(&wrong_aud)), 1000),
            Ok("alice".into())
        );
    }
}
