//! A provider's published keys (JWKS): fetched, cached for their
//! `max-age` (or [`JWKS_TTL`](super::JWKS_TTL)), fetched again on an
//! unknown `kid` at most every [`JWKS_MIN_REFRESH`](super::JWKS_MIN_REFRESH),
//! one fetch at a time.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey};

use super::{AuthError, JWKS_TTL};

/// How long one fetch of the key set may take.
const JWKS_TIMEOUT: Duration = Duration::from_secs(5);

/// A provider's published keys, cached; clones share the cache.
#[derive(Clone)]
pub(super) struct Jwks {
    pub(super) url: String,
    pub(super) min_refresh: Duration,
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
    pub(super) fn new(url: String, min_refresh: Duration) -> Self {
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
    pub(super) async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, AuthError> {
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

/// `max-age` of a `Cache-Control` value.
pub(super) fn max_age(value: &str) -> Option<Duration> {
    value
        .split(',')
        .filter_map(|d| d.trim().strip_prefix("max-age="))
        .find_map(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
}
