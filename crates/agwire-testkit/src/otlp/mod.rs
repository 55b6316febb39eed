//! An OTLP/HTTP receiver: what a test points an OpenTelemetry exporter at
//! (`OTEL_EXPORTER_OTLP_ENDPOINT` of a child process, or an exporter's
//! endpoint), and then asserts on the spans and metric points it received.
//!
//! It answers `POST /v1/traces` and `POST /v1/metrics` as a collector would,
//! in both OTLP/HTTP encodings (`application/x-protobuf` and
//! `application/json`), and keeps what arrives flattened into [`Span`]s and
//! [`MetricPoint`]s: ids as lowercase hex, attributes as a JSON object, the
//! resource and instrumentation scope on every item. Waiting is on arrivals,
//! never on sleeps: [`Receiver::wait_spans`] checks again whenever an export
//! comes in, and on timeout fails with a dump of everything received.
//!
//! ```no_run
//! # async fn example() {
//! use std::time::Duration;
//! use agwire_testkit::otlp::{Receiver, SpanKind};
//!
//! let receiver = Receiver::start().await;
//! // e.g. Command::new(service).env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
//! let spans = receiver
//!     .wait_spans(Duration::from_secs(10), "the run's server span", |spans| {
//!         spans.iter().any(|span| span.name == "POST /runs")
//!     })
//!     .await;
//! let server = spans.iter().find(|span| span.name == "POST /runs").unwrap();
//! assert_eq!(server.kind, SpanKind::Server);
//! assert_eq!(server.attr_i64("http.response.status_code"), Some(200));
//! # }
//! ```
//!
//! The server is a task on the runtime that started it: a test waiting for
//! exports must leave that runtime free to serve them. Block nowhere on a
//! current-thread runtime (an SDK's `force_flush` with the blocking HTTP
//! client belongs in `tokio::task::spawn_blocking` or a thread of its own),
//! or the export waits for the test that waits for the export.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode as HttpStatus, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1 as trace;
use prost::Message as _;
use serde_json::{Map, Value};
use tokio::sync::{oneshot, watch};

mod flatten;
mod render;

pub use flatten::any_value_to_json;
use flatten::{flatten_metrics, flatten_spans};
pub use render::trace_tree;
use render::{dump_metrics, dump_spans};

/// The largest export body taken (a larger one is answered 413). The
/// exporters' own default limit is 64 MiB; a test's exports are far smaller.
pub const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// A span as received, flattened for assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The trace id: 32 lowercase hex digits.
    pub trace_id: String,
    /// The span id: 16 lowercase hex digits.
    pub span_id: String,
    /// The parent's span id (16 hex digits); `None` for a root span.
    pub parent_span_id: Option<String>,
    /// The W3C `tracestate`, as sent (usually empty).
    pub trace_state: String,
    /// The span's name.
    pub name: String,
    /// Its kind.
    pub kind: SpanKind,
    /// Start, in nanoseconds since the Unix epoch.
    pub start_unix_nano: u64,
    /// End, in nanoseconds since the Unix epoch.
    pub end_unix_nano: u64,
    /// Its attributes, in the order sent (see [`any_value_to_json`] for the
    /// mapping of each type).
    pub attributes: Map<String, Value>,
    /// Its events, in the order sent.
    pub events: Vec<SpanEvent>,
    /// Its links, in the order sent.
    pub links: Vec<SpanLink>,
    /// The status code.
    pub status_code: StatusCode,
    /// The status message (set with [`StatusCode::Error`] only).
    pub status_message: String,
    /// The attributes of the resource that sent it (`service.name`, …).
    pub resource: Map<String, Value>,
    /// The name of the instrumentation scope (the tracer's name).
    pub scope: String,
    /// How many attributes the sender dropped (over its limits).
    pub dropped_attributes_count: u32,
}

impl Span {
    /// The attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }

    /// The attribute `key` if it is a string.
    pub fn attr_str(&self, key: &str) -> Option<&str> {
        self.attr(key).and_then(Value::as_str)
    }

    /// The attribute `key` if it is an integer.
    pub fn attr_i64(&self, key: &str) -> Option<i64> {
        self.attr(key).and_then(Value::as_i64)
    }

    /// The attribute `key` if it is a number (an integer or a double).
    pub fn attr_f64(&self, key: &str) -> Option<f64> {
        self.attr(key).and_then(Value::as_f64)
    }

    /// The attribute `key` if it is a boolean.
    pub fn attr_bool(&self, key: &str) -> Option<bool> {
        self.attr(key).and_then(Value::as_bool)
    }

    /// The first event called `name`.
    pub fn event(&self, name: &str) -> Option<&SpanEvent> {
        self.events.iter().find(|event| event.name == name)
    }
}

/// An event of a [`Span`].
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    /// Its name.
    pub name: String,
    /// When, in nanoseconds since the Unix epoch.
    pub time_unix_nano: u64,
    /// Its attributes.
    pub attributes: Map<String, Value>,
}

/// A link of a [`Span`] to another span.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanLink {
    /// The linked span's trace id (32 hex digits).
    pub trace_id: String,
    /// The linked span's id (16 hex digits).
    pub span_id: String,
    /// The link's attributes.
    pub attributes: Map<String, Value>,
}

/// The kind of a [`Span`] (OTLP's `Span.SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpanKind {
    /// Not given (or a value this receiver does not know).
    Unspecified,
    /// An internal operation.
    Internal,
    /// The server side of a request.
    Server,
    /// The client side of a request.
    Client,
    /// A message sent.
    Producer,
    /// A message received.
    Consumer,
}

impl SpanKind {
    fn from_otlp(kind: i32) -> Self {
        match trace::span::SpanKind::try_from(kind) {
            Ok(trace::span::SpanKind::Internal) => Self::Internal,
            Ok(trace::span::SpanKind::Server) => Self::Server,
            Ok(trace::span::SpanKind::Client) => Self::Client,
            Ok(trace::span::SpanKind::Producer) => Self::Producer,
            Ok(trace::span::SpanKind::Consumer) => Self::Consumer,
            Ok(trace::span::SpanKind::Unspecified) | Err(_) => Self::Unspecified,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Internal => "internal",
            Self::Server => "server",
            Self::Client => "client",
            Self::Producer => "producer",
            Self::Consumer => "consumer",
        }
    }
}

/// The status code of a [`Span`] (OTLP's `Status.StatusCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusCode {
    /// Not set (or a value this receiver does not know).
    Unset,
    /// Set to success.
    Ok,
    /// Set to failure.
    Error,
}

impl StatusCode {
    fn from_otlp(code: i32) -> Self {
        match trace::status::StatusCode::try_from(code) {
            Ok(trace::status::StatusCode::Ok) => Self::Ok,
            Ok(trace::status::StatusCode::Error) => Self::Error,
            Ok(trace::status::StatusCode::Unset) | Err(_) => Self::Unset,
        }
    }
}

/// One data point of a metric as received, flattened for assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricPoint {
    /// The metric's name.
    pub name: String,
    /// The metric's description.
    pub description: String,
    /// The metric's unit (UCUM, e.g. `s`, `By`, `{request}`).
    pub unit: String,
    /// The metric's kind.
    pub kind: MetricKind,
    /// The point's attributes.
    pub attributes: Map<String, Value>,
    /// A sum's or gauge's value (integer or double), or a histogram's or
    /// summary's sum; NaN when the point has none (a histogram with
    /// negative measurements may omit its sum).
    pub value: f64,
    /// A histogram's or summary's count of measurements; 0 for sums and
    /// gauges.
    pub count: u64,
    /// When the point was taken, in nanoseconds since the Unix epoch.
    pub time_unix_nano: u64,
    /// The attributes of the resource that sent it.
    pub resource: Map<String, Value>,
    /// The name of the instrumentation scope (the meter's name).
    pub scope: String,
}

impl MetricPoint {
    /// The attribute `key` of the point.
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }

    /// The attribute `key` of the point if it is a string.
    pub fn attr_str(&self, key: &str) -> Option<&str> {
        self.attr(key).and_then(Value::as_str)
    }
}

/// The kind of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// A sum (a counter when monotonic, an up-down counter when not).
    Sum {
        /// Whether it only grows.
        monotonic: bool,
    },
    /// A gauge.
    Gauge,
    /// A histogram with explicit buckets.
    Histogram,
    /// An exponential histogram.
    ExponentialHistogram,
    /// A summary (quantiles; legacy senders only).
    Summary,
}

/// The receiver's state, behind its lock.
#[derive(Debug, Default)]
struct Received {
    spans: Vec<Span>,
    metrics: Vec<MetricPoint>,
    requests: usize,
    failing: Option<HttpStatus>,
}

#[derive(Debug)]
struct Shared {
    received: Mutex<Received>,
    /// Bumped after every export request: what the waits wake on.
    arrivals: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Received> {
        // Nothing under this lock panics halfway through a change: a
        // poisoned one holds whole lists still.
        self.received.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn arrived(&self) {
        self.arrivals.send_modify(|count| *count += 1);
    }
}

/// An OTLP/HTTP receiver on `127.0.0.1`, serving until dropped.
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

impl Receiver {
    /// Starts a receiver on a free port of `127.0.0.1`, served by a task on
    /// the current Tokio runtime. Panics if it cannot listen.
    pub async fn start() -> Self {
        let listener = match tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await {
            Ok(listener) => listener,
            Err(error) => panic!("the OTLP receiver cannot listen on 127.0.0.1: {error}"),
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(error) => panic!("the OTLP receiver's address: {error}"),
        };
        let shared = Arc::new(Shared {
            received: Mutex::default(),
            arrivals: watch::Sender::new(0),
        });
        let app = Router::new()
            .route("/v1/traces", post(export_traces))
            .route("/v1/metrics", post(export_metrics))
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            // Ends on a send or a drop of `stop`: when the Receiver goes.
            let _served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Self {
            addr,
            shared,
            stop: Some(stop),
        }
    }

    /// The OTLP/HTTP base URL, `http://127.0.0.1:PORT`: the value for
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, to which exporters append
    /// `/v1/traces` and `/v1/metrics` (an endpoint given to an exporter's
    /// builder in code is used as is: give it [`Receiver::traces_url`]).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `{endpoint}/v1/traces`: for `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// a span exporter's `with_endpoint`.
    pub fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.endpoint())
    }

    /// `{endpoint}/v1/metrics`: for `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`
    /// or a metric exporter's `with_endpoint`.
    pub fn metrics_url(&self) -> String {
        format!("{}/v1/metrics", self.endpoint())
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<Span> {
        self.shared.lock().spans.clone()
    }

    /// Every metric data point received so far, in arrival order (each
    /// export of a cumulative metric repeats it: look at the last).
    pub fn metrics(&self) -> Vec<MetricPoint> {
        self.shared.lock().metrics.clone()
    }

    /// How many export requests arrived (`POST /v1/traces` and
    /// `POST /v1/metrics`), whatever they were answered: a retried export
    /// counts each attempt.
    pub fn requests(&self) -> usize {
        self.shared.lock().requests
    }

    /// While `Some(status)`, every export is answered `status` (e.g. 503:
    /// a collector in trouble; 400: one rejecting the data) and nothing is
    /// stored. `None` goes back to taking exports. Panics on a status code
    /// outside 100..=999.
    pub fn set_failing(&self, status: Option<u16>) {
        let status = status.map(|code| match HttpStatus::from_u16(code) {
            Ok(status) => status,
            Err(error) => panic!("set_failing({code}): not an HTTP status: {error}"),
        });
        self.shared.lock().failing = status;
    }

    /// Waits until `done` holds of every span received, checking again on
    /// each export that arrives; returns the spans it held of. Panics after
    /// `bound` with `what` and a dump of every span received, trace by
    /// trace.
    pub async fn wait_spans(
        &self,
        bound: Duration,
        what: &str,
        done: impl Fn(&[Span]) -> bool,
    ) -> Vec<Span> {
        let mut arrivals = self.shared.arrivals.subscribe();
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            // Marked seen before looking: an export from here on wakes us.
            arrivals.borrow_and_update();
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            if !matches!(
                tokio::time::timeout_at(deadline, arrivals.changed()).await,
                Ok(Ok(()))
            ) {
                panic!(
                    "OTLP receiver: {what}: not within {bound:?} ({} export requests received).\n{}",
                    self.requests(),
                    dump_spans(&self.spans())
                );
            }
        }
    }

    /// Waits until `done` holds of every metric point received, checking
    /// again on each export that arrives; returns the points it held of.
    /// Panics after `bound` with `what` and a dump of every point received.
    pub async fn wait_metrics(
        &self,
        bound: Duration,
        what: &str,
        done: impl Fn(&[MetricPoint]) -> bool,
    ) -> Vec<MetricPoint> {
        let mut arrivals = self.shared.arrivals.subscribe();
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            arrivals.borrow_and_update();
            let points = self.metrics();
            if done(&points) {
                return points;
            }
            if !matches!(
                tokio::time::timeout_at(deadline, arrivals.changed()).await,
                Ok(Ok(()))
            ) {
                panic!(
                    "OTLP receiver: {what}: not within {bound:?} ({} export requests received).\n{}",
                    self.requests(),
                    dump_metrics(&self.metrics())
                );
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The encodings of OTLP/HTTP.
#[derive(Debug, Clone, Copy)]
enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    fn content_type(self) -> &'static str {
        match self {
            Self::Protobuf => "application/x-protobuf",
            Self::Json => "application/json",
        }
    }
}

/// Why a request is not taken: the status it is answered and a line.
type Refusal = (HttpStatus, String);

/// The request's encoding, or why it is refused.
fn encoding(headers: &HeaderMap) -> Result<Encoding, Refusal> {
    if let Some(coding) = headers.get(header::CONTENT_ENCODING)
        && !coding.as_bytes().eq_ignore_ascii_case(b"identity")
    {
        return Err((
            HttpStatus::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Encoding {coding:?}: the test receiver takes uncompressed bodies"),
        ));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let media_type = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match media_type.as_str() {
        "application/x-protobuf" => Ok(Encoding::Protobuf),
        "application/json" => Ok(Encoding::Json),
        _ => Err((
            HttpStatus::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Type {content_type:?}: OTLP/HTTP is application/x-protobuf or application/json"
            ),
        )),
    }
}

fn refuse(status: HttpStatus, why: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        why,
    )
        .into_response()
}

/// Counts the request, and answers it at once while failing.
fn admit(shared: &Shared, headers: &HeaderMap) -> Result<Encoding, Refusal> {
    let failing = {
        let mut received = shared.lock();
        received.requests += 1;
        received.failing
    };
    let admitted = match failing {
        Some(status) => Err((status, "the test receiver is set to fail".into())),
        None => encoding(headers),
    };
    if admitted.is_err() {
        shared.arrived();
    }
    admitted
}

/// The success answer: an empty `Export*ServiceResponse` in the request's
/// encoding.
fn accepted(encoding: Encoding, empty_protobuf: Vec<u8>) -> Response {
    let body = match encoding {
        Encoding::Protobuf => empty_protobuf,
        Encoding::Json => b"{}".to_vec(),
    };
    (
        HttpStatus::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(encoding.content_type()),
        )],
        body,
    )
        .into_response()
}

/// An export request's body in its encoding, or the 400 that refuses it
/// (counted as arrived: a wait sees the refusal).
fn decode<T>(
    shared: &Shared,
    encoding: Encoding,
    body: &[u8],
    what: &str,
) -> Result<T, Box<Response>>
where
    T: prost::Message + Default + serde::de::DeserializeOwned,
{
    let decoded = match encoding {
        Encoding::Protobuf => T::decode(body).map_err(|error| error.to_string()),
        Encoding::Json => serde_json::from_slice::<T>(body).map_err(|error| error.to_string()),
    };
    decoded.map_err(|error| {
        shared.arrived();
        Box::new(refuse(
            HttpStatus::BAD_REQUEST,
            format!("not an {what} ({encoding:?}): {error}"),
        ))
    })
}

async fn export_traces(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let encoding = match admit(&shared, &headers) {
        Ok(encoding) => encoding,
        Err((status, why)) => return refuse(status, why),
    };
    let request = match decode::<ExportTraceServiceRequest>(
        &shared,
        encoding,
        &body,
        "ExportTraceServiceRequest",
    ) {
        Ok(request) => request,
        Err(refused) => return *refused,
    };
    let spans = flatten_spans(request);
    shared.lock().spans.extend(spans);
    shared.arrived();
    accepted(
        encoding,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

async fn export_metrics(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let encoding = match admit(&shared, &headers) {
        Ok(encoding) => encoding,
        Err((status, why)) => return refuse(status, why),
    };
    let request = match decode::<ExportMetricsServiceRequest>(
        &shared,
        encoding,
        &body,
        "ExportMetricsServiceRequest",
    ) {
        Ok(request) => request,
        Err(refused) => return *refused,
    };
    let points = flatten_metrics(request);
    shared.lock().metrics.extend(points);
    shared.arrived();
    accepted(
        encoding,
        ExportMetricsServiceResponse::default().encode_to_vec(),
    )
}
