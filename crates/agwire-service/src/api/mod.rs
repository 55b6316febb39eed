//! The HTTP API: thin typed handlers over the run engine, one file per
//! resource; the run request's validation ([`validate`]) is its own. Handlers return [`ApiResult`]; every error is JSON
//! `{"detail": ...}` ([`ApiError`]), and the limits in [`limits`] answer the
//! same way. Nothing outside this module knows axum.

mod agui;
mod attachments;
mod browser;
mod calendar;
mod doc;
pub(crate) mod error;
mod history;
mod input;
mod jobs;
pub(crate) mod limits;
mod multitask;
mod ops;
mod profile;
mod runs;
mod serve;
mod stream;
mod threads;
mod usage;
pub mod validate;

use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};

use axum::http::{HeaderValue, Method, Request, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use utoipa::OpenApi as _;

use crate::service::Service;
pub use error::ApiError;
pub(crate) use error::ApiResult;
use validate::MAX_PAYLOAD_BYTES;

/// Backend tools (frontend tools may not reuse their names).
const BACKEND_TOOLS: &[&str] = &crate::brain::tools::NAMES;

pub(crate) use crate::engine::now_ms;

/// The authenticated user of a request (401 without a valid token when auth
/// is on).
pub(crate) struct User(pub(crate) String);

impl axum::extract::FromRequestParts<Service> for User {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        service: &Service,
    ) -> Result<Self, ApiError> {
        authenticate(&parts.headers, service).await.map(User)
    }
}

/// The user a request's `Authorization` names (the local user when auth is
/// off).
async fn authenticate(
    headers: &axum::http::HeaderMap,
    service: &Service,
) -> Result<String, ApiError> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    service
        .auth
        .user(authorization, now_ms() / 1000)
        .await
        .map_err(|why| ApiError::unauthorized(why.to_string()))
}

impl Service {
    /// The API routes, and `/openapi.json` describing exactly them.
    pub fn router(&self) -> Router {
        self.router_with(Router::new())
    }

    /// The API routes with `pages` beside them (the web app's, say), all
    /// under the same layers: every request gets a request id and a log
    /// line, and a path nothing serves is a JSON 404 like every other error.
    pub fn router_with(&self, pages: Router) -> Router {
        use crate::api::limits::{body_limit, header_limits, json_errors};
        use axum::middleware::from_fn;
        use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};
        use utoipa_axum::routes;
        let http = &self.options.http;
        let upload_limit = self
            .attachments
            .as_ref()
            .map_or(0, |a| a.max_bytes + attachments::MULTIPART_OVERHEAD);
        let limited = |limit: usize, message: &'static str| {
            move |(schemas, paths, method): UtoipaMethodRouter<Service>| {
                (
                    schemas,
                    paths,
                    method.layer(from_fn(body_limit(limit, message))),
                )
            }
        };
        // Routes with a body limit of their own (runs, uploads); the rest
        // take small JSON documents at most.
        let run_body = limited(
            MAX_PAYLOAD_BYTES,
            "RunAgentInput payload exceeds size limit",
        );
        let agui_body = limited(
            self.options.agui_max_payload_bytes,
            "RunAgentInput payload exceeds size limit",
        );
        let upload_body = limited(upload_limit, "attachment exceeds size limit");
        let small = limited(http.max_body_bytes, limits::BODY_TOO_LARGE);
        let (router, document) = OpenApiRouter::with_openapi(doc::ApiDoc::openapi())
            .routes(agui_body(routes!(agui::post_agui)))
            .routes(run_body(routes!(runs::post_run)))
            .routes(upload_body(routes!(attachments::upload)))
            .routes(small(routes!(agui::capabilities)))
            .routes(small(routes!(ops::health)))
            .routes(small(routes!(ops::metrics)))
            .routes(small(routes!(ops::openapi)))
            .routes(small(routes!(runs::get_run)))
            .routes(small(routes!(runs::get_events)))
            .routes(small(routes!(runs::cancel_run)))
            .routes(small(routes!(history::get_history)))
            .routes(small(routes!(threads::list)))
            .routes(small(routes!(
                threads::read,
                threads::rename,
                threads::remove
            )))
            .routes(small(routes!(profile::get_profile, profile::patch_profile)))
            .routes(small(routes!(usage::get_usage)))
            .routes(small(routes!(attachments::download)))
            .routes(small(routes!(jobs::create, jobs::list)))
            .routes(small(routes!(jobs::read, jobs::update, jobs::remove)))
            .routes(small(routes!(jobs::runs)))
            .routes(small(routes!(calendar::list_events)))
            .split_for_parts();
        let document = ops::Document(doc::finish(document).into());
        let traced = self.engine.telemetry.is_on();
        let browsers = browser::Browsers::new(
            self.auth.is_enabled(),
            &http.allowed_hosts,
            &http.cors_allowed_origins,
            self.options.public_url.as_deref(),
        );
        router
            .with_state(self.clone())
            .merge(pages)
            .fallback(ops::no_endpoint)
            .layer(axum::Extension(document))
            // The limits above are the body limits (axum's default of 2 MB
            // would cut uploads short).
            .layer(axum::extract::DefaultBodyLimit::disable())
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                Duration::from_secs(http.request_timeout_seconds),
            ))
            .layer(from_fn(header_limits(
                http.max_header_bytes,
                http.max_headers,
            )))
            .layer(from_fn(json_errors))
            .layer(CatchPanicLayer::custom(panicked))
            .layer(from_fn(input::storable_url))
            // Inside CORS, whose preflight answers come first.
            .layer(from_fn(move |request, next| {
                browsers.clone().guard(request, next)
            }))
            .layer(tower::util::option_layer(cors(&http.cors_allowed_origins)))
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(move |request: &Request<axum::body::Body>| {
                        request_span(request, traced)
                    })
                    .on_response(log_response)
                    .on_failure(()),
            )
            .layer(PropagateRequestIdLayer::x_request_id())
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
    }
}

/// A panic in a handler: 500 JSON (the panic itself goes to the log).
#[allow(clippy::needless_pass_by_value)] // the signature `CatchPanicLayer::custom` takes
fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    tracing::error!(panic = message, "a request handler panicked");
    axum::response::IntoResponse::into_response(ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error",
    ))
}

/// CORS for the configured origins (none: no layer, browsers keep the
/// same-origin rule).
fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::ACCEPT,
                header::HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([
                header::LOCATION,
                header::HeaderName::from_static("x-request-id"),
            ])
            .max_age(Duration::from_secs(600)),
    )
}

/// Each request's span: method, path (never the query: signed URLs carry
/// their signature there) and request id. Exported (`traced`), it is an
/// HTTP server span as the semantic conventions name it and its
/// attributes, a child of the caller's span when the request carries
/// `traceparent`, its trace id in the request's log lines.
fn request_span<B>(request: &Request<B>, traced: bool) -> tracing::Span {
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !traced {
        return tracing::info_span!(
            "request",
            method = %request.method(),
            path = request.uri().path(),
            request_id = id,
        );
    }
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let method = request.method().as_str();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(axum::extract::MatchedPath::as_str);
    let version = match request.version() {
        axum::http::Version::HTTP_10 => "1.0",
        axum::http::Version::HTTP_2 => "2",
        _ => "1.1",
    };
    // `{method} {route}`; the method alone where no route matched (the
    // conventions keep paths, unbounded, out of span names).
    let name = match route {
        Some(route) => format!("{method} {route}"),
        None => method.to_owned(),
    };
    let span = tracing::info_span!(
        "request",
        otel.name = %name,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = method,
        http.route = route,
        url.path = request.uri().path(),
        url.scheme = "http",
        network.protocol.version = version,
        user_agent.original = request
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok()),
        http.response.status_code = tracing::field::Empty,
        request_id = id,
        trace_id = tracing::field::Empty,
    );
    let _ = span.set_parent(crate::telemetry::extract_headers(request.headers()));
    let trace = span.context().span().span_context().trace_id();
    if trace != opentelemetry::trace::TraceId::INVALID {
        span.record("trace_id", tracing::field::display(trace));
    }
    span
}

/// One line per request, when its answer's head is sent (a stream's body
/// continues after it); on an exported span, the status (a 5xx is an
/// error: a 4xx is the client's).
fn log_response<B>(response: &Response<B>, latency: Duration, span: &tracing::Span) {
    let status = response.status();
    // (i64: tracing-opentelemetry exports a u64 as text.)
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
    tracing::info!(
        status = response.status().as_u16(),
        ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
        "request"
    );
}
