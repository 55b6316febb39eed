//! [`Client`] and its builder: where the agent is and how to talk to it.
//!
//! The two methods that start a run are defined beside what they use, so
//! that this module depends on neither: [`Client::run`] in `stream.rs`,
//! beside [`RunStream`] (which resumes a dropped stream through this
//! client), and [`Client::run_to_completion`] in `subscriber.rs`, beside the
//! hooks it calls.
//!
//! [`RunStream`]: crate::RunStream

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Response, Url};

use crate::error::Error;

/// Which wire formats to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Accept {
    /// `text/event-stream` only (the official client's default).
    #[default]
    Sse,
    /// Protobuf only.
    Proto,
    /// Protobuf preferred, SSE accepted.
    Both,
}

impl Accept {
    fn header(self) -> &'static str {
        match self {
            Accept::Sse => "text/event-stream",
            Accept::Proto => "application/vnd.ag-ui.event+proto",
            Accept::Both => "application/vnd.ag-ui.event+proto, text/event-stream",
        }
    }
}

/// How a dropped SSE stream whose frames carried `id:` is resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// Attempts in a row without receiving a new event before giving up
    /// (0 turns reconnecting off).
    pub max_attempts: u32,
    /// Wait before the first attempt; doubled for each further one.
    pub initial_backoff: Duration,
    /// Longest wait between attempts.
    pub max_backoff: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// A client for one AG-UI endpoint.
///
/// Cheap to clone (the connection pool is shared).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    url: Url,
    headers: HeaderMap,
    accept: Accept,
    pub(crate) verify: bool,
    pub(crate) reconnect: Reconnect,
    pub(crate) idle_timeout: Option<Duration>,
}

/// Builds a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    url: String,
    headers: Vec<(String, String)>,
    bearer: Option<String>,
    connect_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    timeout: Option<Duration>,
    accept: Accept,
    verify: bool,
    reconnect: Reconnect,
    http: Option<reqwest::Client>,
}

impl ClientBuilder {
    /// Adds a header to every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sends `Authorization: Bearer <token>`.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Limit on establishing the connection (refused with
    /// [`ClientBuilder::http_client`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Limit on the time between two pieces of the body (keep-alive comments
    /// count): a silent stream is an error instead of a hang.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Limit on a whole request, body included (none by default: runs may be
    /// long). Refused with [`ClientBuilder::http_client`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Which formats to ask for.
    pub fn accept(mut self, accept: Accept) -> Self {
        self.accept = accept;
        self
    }

    /// Whether events pass the official client's verification and are folded
    /// (on by default). Off, [`RunStream`](crate::RunStream) yields events as decoded.
    pub fn verify(mut self, yes: bool) -> Self {
        self.verify = yes;
        self
    }

    /// How dropped streams are resumed.
    pub fn reconnect(mut self, reconnect: Reconnect) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// Sends every request through `http` instead of a `reqwest::Client`
    /// built here: for a proxy, your own TLS roots or client certificate, a
    /// connection pool shared with the rest of your program.
    ///
    /// `http`'s own settings then rule the connection, so
    /// [`ClientBuilder::connect_timeout`] and [`ClientBuilder::timeout`],
    /// which configure the `reqwest::Client` built here, cannot be combined
    /// with it: [`ClientBuilder::build`] refuses them with [`Error::Config`]
    /// rather than ignore them (set them on `reqwest::ClientBuilder`
    /// instead). Everything else still applies: the headers and bearer token
    /// (added to each request), [`ClientBuilder::idle_timeout`], the accepted
    /// formats, verification and reconnection.
    ///
    /// Name reqwest through this crate's re-export ([`crate::reqwest`]) so
    /// that the versions match.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// The client.
    pub fn build(self) -> Result<Client, Error> {
        let url = Url::parse(&self.url).map_err(|e| Error::Config(format!("url: {e}")))?;
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| Error::Config(format!("header name '{name}': {e}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|e| Error::Config(format!("header '{name}': {e}")))?;
            headers.append(name, value);
        }
        if let Some(token) = &self.bearer {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|e| Error::Config(format!("bearer token: {e}")))?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
        let http = match self.http {
            Some(_) if self.connect_timeout.is_some() || self.timeout.is_some() => {
                return Err(Error::Config(
                    "connect_timeout and timeout configure the reqwest::Client built here; \
                     with http_client, set them on your own reqwest::Client"
                        .into(),
                ));
            }
            Some(http) => http,
            None => {
                let mut http = reqwest::Client::builder();
                if let Some(t) = self.connect_timeout {
                    http = http.connect_timeout(t);
                }
                if let Some(t) = self.timeout {
                    http = http.timeout(t);
                }
                http.build().map_err(|e| Error::Config(e.to_string()))?
            }
        };
        Ok(Client {
            http,
            url,
            headers,
            accept: self.accept,
            verify: self.verify,
            reconnect: self.reconnect,
            idle_timeout: self.idle_timeout,
        })
    }
}

impl Client {
    /// A builder for the endpoint at `url`.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            url: url.into(),
            headers: Vec::new(),
            bearer: None,
            connect_timeout: None,
            idle_timeout: None,
            timeout: None,
            accept: Accept::default(),
            verify: true,
            reconnect: Reconnect::default(),
            http: None,
        }
    }

    /// A client for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Result<Self, Error> {
        Self::builder(url).build()
    }

    /// The endpoint.
    pub fn url(&self) -> &Url {
        &self.url
    }

    pub(crate) async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Bytes>,
        last_event_id: Option<&str>,
    ) -> Result<Response, Error> {
        let mut request = self
            .http
            .request(method, url)
            .headers(self.headers.clone())
            .header(header::ACCEPT, self.accept.header());
        if let Some(body) = body {
            request = request
                .header(header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("application/json"));
        let body = response.text().await.unwrap_or_default();
        let json = if is_json {
            serde_json::from_str(&body).ok()
        } else {
            None
        };
        Err(Error::Status { status, body, json })
    }
}
