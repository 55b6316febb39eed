use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::jwks::max_age;
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
