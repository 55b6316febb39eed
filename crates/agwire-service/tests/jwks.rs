//! Tokens from an identity provider that publishes its keys as a JWKS:
//! EdDSA and ES256 tokens verified against a real JWKS server (over HTTP)
//! that rotates its keys mid-test, with no restart of the service; tokens
//! naming unknown keys that cannot make it fetch more than once per window;
//! a provider that stalls (a token of a key already held is answered while
//! the fetch is held) or fails (the last good keys stay in use). No test
//! waits with a sleep: windows are an hour or zero, the rotation polls until
//! the new key is fetched, a stalled fetch is held until the test releases
//! it, and every wait is bounded by [`PATIENCE`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agwire_service::BuiltinAgent;
use agwire_service::Config;
use agwire_service::auth::Auth;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair,
};
use axum::response::IntoResponse;
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

/// What the JWKS endpoint does when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Answers the key set.
    Serve,
    /// Holds the request until [`Provider::release`], then answers.
    Stall,
    /// Answers 500.
    Fail,
}

/// What the JWKS endpoint publishes and how; the test changes it.
struct Published {
    keys: Mutex<Vec<Value>>,
    /// The answer's `Cache-Control: max-age`.
    max_age: AtomicU64,
    behaviour: Mutex<Behaviour>,
    released: tokio::sync::watch::Sender<bool>,
    /// Requests received, counted on arrival (a stalled one while held).
    fetches: AtomicUsize,
}

/// A JWKS endpoint over HTTP on loopback.
struct Provider {
    url: String,
    published: Arc<Published>,
}

impl Provider {
    fn fetches(&self) -> usize {
        self.published.fetches.load(Ordering::SeqCst)
    }

    fn publish(&self, keys: Vec<Value>) {
        *self.published.keys.lock().unwrap() = keys;
    }

    fn set_max_age(&self, seconds: u64) {
        self.published.max_age.store(seconds, Ordering::SeqCst);
    }

    fn behave(&self, behaviour: Behaviour) {
        *self.published.behaviour.lock().unwrap() = behaviour;
    }

    /// Lets every stalled request (and any later one) answer.
    fn release(&self) {
        self.published.released.send_replace(true);
    }
}

/// The longest any wait in these tests may take: a bound for a hang, never
/// a measure of speed.
const PATIENCE: Duration = Duration::from_secs(30);

async fn jwks_endpoint(
    axum::extract::State(published): axum::extract::State<Arc<Published>>,
) -> axum::response::Response {
    published.fetches.fetch_add(1, Ordering::SeqCst);
    let behaviour = *published.behaviour.lock().unwrap();
    if behaviour == Behaviour::Fail {
        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    if behaviour == Behaviour::Stall {
        let mut released = published.released.subscribe();
        // Bounded: a test that never releases fails, it does not hang.
        let _ = tokio::time::timeout(PATIENCE, released.wait_for(|r| *r)).await;
    }
    // Read after the stall: what the provider publishes when it answers.
    let keys = published.keys.lock().unwrap().clone();
    let max_age = published.max_age.load(Ordering::SeqCst);
    (
        [("cache-control", format!("public, max-age={max_age}"))],
        axum::Json(json!({ "keys": keys })),
    )
        .into_response()
}

async fn provider(initial: Vec<Value>) -> Provider {
    let published = Arc::new(Published {
        keys: Mutex::new(initial),
        max_age: AtomicU64::new(3600),
        behaviour: Mutex::new(Behaviour::Serve),
        released: tokio::sync::watch::Sender::new(false),
        fetches: AtomicUsize::new(0),
    });
    let app = axum::Router::new()
        .route("/.well-known/jwks.json", axum::routing::get(jwks_endpoint))
        .with_state(published.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/.well-known/jwks.json",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Provider { url, published }
}

/// Polls `done` until it holds; panics with `what` past [`PATIENCE`].
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `future`, or a panic naming `what` past [`PATIENCE`].
async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer in {PATIENCE:?}"))
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

/// `token` sent `n` times at once, each naming a key id of its own that no
/// provider published: the answers.
async fn flood(addr: std::net::SocketAddr, key: &Key, n: usize) -> Vec<(u16, String)> {
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..n {
        let made_up = token(key, Some(&format!("made-up-{i}")), "mallory");
        requests.spawn(async move { whoami(addr, &made_up).await });
    }
    within("the flood", requests.join_all()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_key_ids_cannot_flood_the_provider() {
    let first = ed25519("2026-a");
    let second = es256("2026-b");
    let idp = provider(vec![first.jwk.clone()]).await;
    // A window no test run outlasts: whatever the machine's speed, every
    // request below falls in the first one.
    let server = verifying(&idp, Duration::from_secs(3600)).await;
    // Before any key is held, a flood of tokens naming made-up key ids at
    // once: the first fetch is shared by all of them (one fetch), and each
    // is refused.
    let answers = flood(server.addr, &second, 40).await;
    assert!(
        answers
            .iter()
            .all(|a| *a == (401, "unknown token signing key".into())),
        "{answers:?}"
    );
    assert_eq!(idp.fetches(), 1);
    // The published key verifies from the cached set.
    let alice = token(&first, Some(first.kid), "alice");
    assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));
    assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));
    assert_eq!(idp.fetches(), 1);
    // Within the window, tokens naming keys the provider has not published
    // are refused without a fetch: none would even reach a stalled provider.
    idp.behave(Behaviour::Stall);
    let answers = flood(server.addr, &second, 40).await;
    assert!(
        answers
            .iter()
            .all(|a| *a == (401, "unknown token signing key".into())),
        "{answers:?}"
    );
    let early = token(&second, Some(second.kid), "bob");
    for _ in 0..20 {
        assert_eq!(
            whoami(server.addr, &early).await,
            (401, "unknown token signing key".into())
        );
    }
    assert_eq!(idp.fetches(), 1);
    idp.release();
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
    assert_eq!(idp.fetches(), 1);

    // The provider rotates: the new key is published, the old one retired.
    // A token naming the new key is refused at once, without a fetch, until
    // the window since the last fetch has passed; then the first one makes
    // the service refetch, waits for it and is let in.
    idp.publish(vec![second.jwk.clone()]);
    let bob = token(&second, Some(second.kid), "bob");
    let deadline = Instant::now() + PATIENCE;
    loop {
        match whoami(server.addr, &bob).await {
            (200, who) => {
                assert_eq!(who, "bob");
                break;
            }
            answer => assert_eq!(answer, (401, "unknown token signing key".into())),
        }
        // A refusal never comes from a refetch: the request that refetches
        // is the one let in.
        assert_eq!(idp.fetches(), 1, "a token was refused after a refetch");
        assert!(Instant::now() < deadline, "the new key was never fetched");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(idp.fetches(), 2, "one refetch lets the new key in");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refetch_in_progress_does_not_hold_up_tokens_of_known_keys() {
    let first = ed25519("2026-a");
    let second = es256("2026-b");
    let idp = provider(vec![first.jwk.clone()]).await;
    // Every token naming a key not held may refetch: the refetch below is
    // due at once.
    let server = verifying(&idp, Duration::ZERO).await;
    let alice = token(&first, Some(first.kid), "alice");
    assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));
    assert_eq!(idp.fetches(), 1);

    // The provider rotates in a new key but is slow to answer: the first
    // token naming it makes the service refetch, and that fetch is held.
    idp.publish(vec![first.jwk.clone(), second.jwk.clone()]);
    idp.behave(Behaviour::Stall);
    let addr = server.addr;
    let bob = token(&second, Some(second.kid), "bob");
    let rotated = tokio::spawn(async move { whoami(addr, &bob).await });
    eventually("the refetch never reached the provider", || {
        idp.fetches() == 2
    })
    .await;
    // A token of a key already held is answered while the fetch is held.
    assert_eq!(
        within("a known key during a refetch", whoami(server.addr, &alice)).await,
        (200, "alice".into())
    );
    assert!(
        !rotated.is_finished(),
        "the refetch ended before its release"
    );
    // Released only now: the held fetch was still the service's when the
    // known key was answered (a service that made the known key wait for it
    // gave it up at its timeout, and the new key is then not in).
    idp.release();
    assert_eq!(
        within("the token that refetched", rotated).await.unwrap(),
        (200, "bob".into())
    );
    assert_eq!(idp.fetches(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_set_is_served_while_it_is_refreshed() {
    let first = ed25519("2026-a");
    let second = es256("2026-b");
    let idp = provider(vec![first.jwk.clone()]).await;
    // The first set is stale as soon as it is fetched.
    idp.set_max_age(0);
    let server = verifying(&idp, Duration::ZERO).await;
    let alice = token(&first, Some(first.kid), "alice");
    assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));
    assert_eq!(idp.fetches(), 1);

    // A token of a key in the stale set starts a refresh and is answered
    // from the stale set without waiting for it, although the provider
    // holds that refresh.
    idp.publish(vec![first.jwk.clone(), second.jwk.clone()]);
    idp.set_max_age(3600);
    idp.behave(Behaviour::Stall);
    assert_eq!(
        within(
            "a stale key during its refresh",
            whoami(server.addr, &alice)
        )
        .await,
        (200, "alice".into())
    );
    eventually("the stale set was never refreshed", || idp.fetches() == 2).await;
    // Once released, that one refresh brings the new key in: a token naming
    // it verifies with no fetch of its own (a service that refetched in
    // line had given the held one up at its timeout, and fetched again).
    idp.release();
    let bob = token(&second, Some(second.kid), "bob");
    assert_eq!(whoami(server.addr, &bob).await, (200, "bob".into()));
    assert_eq!(idp.fetches(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_provider_keeps_the_last_good_keys_in_use() {
    let first = ed25519("2026-a");
    let second = es256("2026-b");
    let idp = provider(vec![first.jwk.clone()]).await;
    // Stale at once, and refetched as often as asked: every token below
    // makes the service try the provider again.
    idp.set_max_age(0);
    let server = verifying(&idp, Duration::ZERO).await;
    let alice = token(&first, Some(first.kid), "alice");
    assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));

    // The provider answers 500 from now on: the keys fetched before still
    // verify, stale as they are, through several failed refetches.
    idp.behave(Behaviour::Fail);
    let failed_from = idp.fetches();
    let deadline = Instant::now() + PATIENCE;
    while idp.fetches() < failed_from + 3 {
        assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));
        assert!(Instant::now() < deadline, "the service never refetched");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(whoami(server.addr, &alice).await, (200, "alice".into()));
    // A key it never had is unknown, not "unavailable": keys are held.
    let bob = token(&second, Some(second.kid), "bob");
    assert_eq!(
        whoami(server.addr, &bob).await,
        (401, "unknown token signing key".into())
    );
}
