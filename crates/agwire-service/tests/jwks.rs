//! Tokens from an identity provider that publishes its keys as a JWKS:
//! EdDSA and ES256 tokens verified against a real JWKS server (over HTTP)
//! that rotates its keys mid-test, with no restart of the service, and
//! tokens naming unknown keys that cannot make it fetch more than once per
//! window. No test waits for a window with a sleep: the flood's window is
//! an hour, the rotation polls until the new key is fetched.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agwire_service::BuiltinAgent;
use agwire_service::Config;
use agwire_service::auth::Auth;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// A signing key and its public JWK.
struct Key {
    kid: &'static str,
    alg: Algorithm,
    private: EncodingKey,
    jwk: Value,
}

fn ed25519(kid: &'static str) -> Key {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    Key {
        kid,
        alg: Algorithm::EdDSA,
        private: EncodingKey::from_ed_der(pkcs8.as_ref()),
        jwk: json!({
            "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(pair.public_key().as_ref()),
        }),
    }
}

fn es256(kid: &'static str) -> Key {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
    // An uncompressed point: 0x04, then x and y.
    let point = pair.public_key().as_ref();
    Key {
        kid,
        alg: Algorithm::ES256,
        private: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }),
    }
}

fn token(key: &Key, kid: Option<&str>, sub: &str) -> String {
    let mut header = Header::new(key.alg);
    header.kid = kid.map(str::to_owned);
    let exp = jiff::Timestamp::now().as_second() + 600;
    let claims = json!({"sub": sub, "exp": exp, "aud": "authenticated"});
    jsonwebtoken::encode(&header, &claims, &key.private).unwrap()
}

/// A JWKS endpoint whose key set the test changes; counts its fetches.
struct Provider {
    url: String,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
}

async fn provider(initial: Vec<Value>) -> Provider {
    let keys = Arc::new(Mutex::new(initial));
    let fetches = Arc::new(AtomicUsize::new(0));
    let (served, counted) = (keys.clone(), fetches.clone());
    let app = axum::Router::new().route(
        "/.well-known/jwks.json",
        axum::routing::get(move || {
            let (served, counted) = (served.clone(), counted.clone());
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                let keys = served.lock().unwrap().clone();
                (
                    [("cache-control", "public, max-age=3600")],
                    axum::Json(json!({ "keys": keys })),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/.well-known/jwks.json",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Provider { url, keys, fetches }
}

/// `GET /api/v1/me/profile` with `token`: the status and the user id or
/// the detail.
async fn whoami(addr: std::net::SocketAddr, token: &str) -> (u16, String) {
    let answer = reqwest::Client::new()
        .get(format!("http://{addr}/api/v1/me/profile"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap();
    let said = body["id"].as_str().or(body["detail"].as_str()).unwrap();
    (status, said.to_owned())
}

/// A service verifying tokens against `idp`, refetching its keys at most
/// once per `min_refresh`.
async fn verifying(idp: &Provider, min_refresh: Duration) -> common::Server {
    let auth = Auth::none()
        .with_jwks(idp.url.clone())
        .with_jwks_min_refresh(min_refresh)
        .with_audience("authenticated");
    common::start(&Config::default(), BuiltinAgent::default(), auth).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_key_ids_cannot_flood_the_provider() {
    let first = ed25519("2026-a");
    let second = es256("2026-b");
    let idp = provider(vec![first.jwk.clone()]).await;
    // A window no test run outlasts: whatever the machine's speed, every
    // request below falls in the first one.
    let server = verifying(&idp, Duration::from_secs(3600)).await;
    // The published key verifies; the set is fetched once and cached.
    let alice = token(&first, Some(first.kid), "alice");
    assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));
    assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));
    assert_eq!(idp.fetches.load(Ordering::SeqCst), 1);
    // Tokens naming a key the provider has not published: refused, and
    // within the window none of them makes the service fetch again.
    let early = token(&second, Some(second.kid), "bob");
    for _ in 0..20 {
        assert_eq!(
            whoami(server.addr, &early).await,
            (401, "unknown token signing key".into())
        );
    }
    assert_eq!(idp.fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_without_a_restart() {
    let first = ed25519("2026-a");
    let second = es256("2026-b");
    let idp = provider(vec![first.jwk.clone()]).await;
    let min_refresh = Duration::from_millis(200);
    let server = verifying(&idp, min_refresh).await;
    let alice = token(&first, Some(first.kid), "alice");
    assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));
    assert_eq!(idp.fetches.load(Ordering::SeqCst), 1);

    // The provider rotates: the new key is published, the old one retired.
    // A token naming the new key is refused until the window since the last
    // fetch has passed, then one refetch lets it in.
    *idp.keys.lock().unwrap() = vec![second.jwk.clone()];
    let rotated = Instant::now();
    let bob = token(&second, Some(second.kid), "bob");
    let mut refused = 0;
    loop {
        match whoami(server.addr, &bob).await {
            (200, who) => {
                assert_eq!(who, "bob");
                break;
            }
            answer => assert_eq!(answer, (401, "unknown token signing key".into())),
        }
        refused += 1;
        assert!(
            rotated.elapsed() < Duration::from_secs(30),
            "the new key was never fetched"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // At most one fetch per window: however long that took.
    let windows = rotated.elapsed().as_millis() / min_refresh.as_millis() + 1;
    let fetches = idp.fetches.load(Ordering::SeqCst);
    assert!(
        fetches >= 2 && (fetches as u128) <= 1 + windows,
        "{fetches} fetches in {windows} windows ({refused} refusals before the refetch)"
    );
    // The retired key no longer verifies (the set was replaced).
    assert_eq!(
        whoami(server.addr, &alice).await,
        (401, "unknown token signing key".into())
    );

    // A token naming the new key but signed with another: refused.
    let mut forged_header = Header::new(Algorithm::ES256);
    forged_header.kid = Some(second.kid.into());
    let impostor = es256("impostor");
    let exp = jiff::Timestamp::now().as_second() + 600;
    let forged = jsonwebtoken::encode(
        &forged_header,
        &json!({"sub": "bob", "exp": exp, "aud": "authenticated"}),
        &impostor.private,
    )
    .unwrap();
    assert_eq!(
        whoami(server.addr, &forged).await,
        (401, "invalid token signature".into())
    );
    // The key's algorithm is pinned: HS256 "signed" with the public key is
    // refused (no shared secret is configured), as is a wrong audience.
    let confused = jsonwebtoken::encode(
        &{
            let mut h = Header::new(Algorithm::HS256);
            h.kid = Some(second.kid.into());
            h
        },
        &json!({"sub": "bob", "exp": exp, "aud": "authenticated"}),
        &EncodingKey::from_secret(second.jwk["x"].as_str().unwrap().as_bytes()),
    )
    .unwrap();
    assert_eq!(
        whoami(server.addr, &confused).await,
        (401, "unsupported token algorithm".into())
    );
    let elsewhere = jsonwebtoken::encode(
        &{
            let mut h = Header::new(Algorithm::ES256);
            h.kid = Some(second.kid.into());
            h
        },
        &json!({"sub": "bob", "exp": exp, "aud": "anon"}),
        &second.private,
    )
    .unwrap();
    assert_eq!(
        whoami(server.addr, &elsewhere).await,
        (401, "token audience not accepted".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_provider_refuses_tokens_and_a_shared_secret_still_works() {
    // A port nothing listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", closed.local_addr().unwrap());
    drop(closed);
    let secret = b"a-shared-secret-of-32-bytes-long";
    let auth = Auth::none().with_secret(secret.to_vec()).with_jwks(url);
    let server = common::start(&Config::default(), BuiltinAgent::default(), auth).await;
    let key = ed25519("k");
    assert_eq!(
        whoami(server.addr, &token(&key, Some("k"), "alice")).await,
        (401, "token signing keys unavailable".into())
    );
    let far = jiff::Timestamp::now().as_second() + 600;
    let hs = agwire_service::auth::sign_jwt(secret, "carol", far);
    assert_eq!(whoami(server.addr, &hs).await, (200, "carol".into()));
}
