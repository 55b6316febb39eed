#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod exchange;
mod family;
mod report;
mod scenario;

use std::time::Duration;

use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

pub use family::Family;
pub use report::{
    ExchangeReport, FamilyReport, Features, Finding, Report, ScenarioReport, Severity, Verdict,
};
pub use scenario::Scenario;

/// Why a check could not run at all (a check that ran reports what it found
/// in its [`Report`], never as an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A URL, header or token that cannot be sent.
    #[error("{0}")]
    Config(String),
    /// Nothing answered the first request: the server is not there.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The endpoint.
        url: String,
        /// The transport's words.
        reason: String,
    },
}

/// Where a check is: the scenario about to run or just judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress {
    /// Scenario `index` (from 1) of `total` is starting.
    Started {
        /// Its position, from 1.
        index: usize,
        /// How many run.
        total: usize,
        /// Which.
        scenario: Scenario,
    },
    /// It ended with this verdict.
    Finished {
        /// Which.
        scenario: Scenario,
        /// How it went.
        verdict: Verdict,
    },
}

/// A conformance check of one AG-UI endpoint.
///
/// ```no_run
/// # async fn demo() -> Result<(), agwire_check::Error> {
/// let report = agwire_check::Check::new("http://127.0.0.1:8000/agentic_chat")
///     .bearer_token("secret")
///     .run()
///     .await?;
/// assert!(report.passed(), "{}", report.to_table());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Check {
    url: String,
    headers: Vec<(String, String)>,
    bearer: Option<String>,
    proto: bool,
    timeout: Duration,
    scenarios: Vec<Scenario>,
    forwarded_props: Value,
    capabilities: Option<String>,
}

impl Check {
    /// A check of the endpoint at `url` (the URL `HttpAgent` posts to), with
    /// every scenario, SSE, and 30 s per request.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            bearer: None,
            proto: false,
            timeout: Duration::from_secs(30),
            scenarios: Scenario::ALL.to_vec(),
            forwarded_props: Value::Object(Default::default()),
            capabilities: None,
        }
    }

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

    /// Asks for protobuf (`Accept: application/vnd.ag-ui.event+proto`)
    /// instead of SSE in every run scenario.
    pub fn proto(mut self, yes: bool) -> Self {
        self.proto = yes;
        self
    }

    /// Longest wait for one answer, body included; also how long an aborted
    /// run may keep its thread busy.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs only these scenarios (in [`Scenario::ALL`] order).
    pub fn scenarios(mut self, scenarios: impl IntoIterator<Item = Scenario>) -> Self {
        let chosen: Vec<Scenario> = scenarios.into_iter().collect();
        self.scenarios = Scenario::ALL
            .into_iter()
            .filter(|s| chosen.contains(s))
            .collect();
        self
    }

    /// `forwardedProps` of every run (`{}` by default).
    pub fn forwarded_props(mut self, props: Value) -> Self {
        self.forwarded_props = props;
        self
    }

    /// Where the server publishes its `AgentCapabilities` (AG-UI 1.1 leaves
    /// the place to the server); the capabilities scenario reads it.
    pub fn capabilities_url(mut self, url: impl Into<String>) -> Self {
        self.capabilities = Some(url.into());
        self
    }

    /// Runs the scenarios and judges every answer.
    pub async fn run(&self) -> Result<Report, Error> {
        self.run_with_progress(&mut |_| {}).await
    }

    /// [`Check::run`], telling `progress` where it is.
    pub async fn run_with_progress(
        &self,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Report, Error> {
        let headers = self.header_map()?;
        reqwest::Url::parse(&self.url).map_err(|e| Error::Config(format!("url: {e}")))?;
        let http = reqwest::Client::builder()
            .connect_timeout(self.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| Error::Config(e.to_string()))?;
        scenario::Runner::new(self, http, headers)
            .run(progress)
            .await
    }

    fn header_map(&self) -> Result<HeaderMap, Error> {
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
        Ok(headers)
    }
}
