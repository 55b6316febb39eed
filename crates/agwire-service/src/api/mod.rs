//! The HTTP API: thin typed handlers over the run engine and the store, one
//! file per resource. Handlers return [`ApiResult`]; every error is JSON
//! `{"detail": ...}` ([`ApiError`]), and the limits in [`limits`] answer the
//! same way. Nothing outside this module knows axum.

mod agui;
mod attachments;
mod calendar;
pub(crate) mod error;
mod history;
mod jobs;
pub(crate) mod limits;
mod ops;
mod profile;
mod runs;
mod stream;

use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::{get, post};

use axum::http::{HeaderValue, Method, Request, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::service::Service;
use crate::validate::MAX_PAYLOAD_BYTES;
pub(crate) use error::{ApiError, ApiResult};

/// Backend tools (frontend tools may not reuse their names).
const BACKEND_TOOLS: &[&str] = &crate::brain::tools::NAMES;

pub(crate) use crate::runs::now_ms;

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
    /// Every route the service answers, as (method, path): `/openapi.json`
    /// describes exactly these (a test holds both to it).
    pub const ROUTES: &'static [(&'static str, &'static str)] = &[
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("POST", "/api/v1/agui"),
        ("POST", "/api/v1/agent/runs"),
        ("GET", "/api/v1/agent/runs/{runId}"),
        ("GET", "/api/v1/agent/runs/{runId}/events"),
        ("POST", "/api/v1/agent/runs/{runId}/cancel"),
        ("GET", "/api/v1/agent/history"),
        ("GET", "/api/v1/me/profile"),
        ("PATCH", "/api/v1/me/profile"),
        ("POST", "/api/v1/agent/attachments"),
        ("GET", "/api/v1/agent/attachments/{id}"),
        ("POST", "/api/v1/automation/jobs"),
        ("GET", "/api/v1/automation/jobs"),
        ("GET", "/api/v1/automation/jobs/{id}"),
        ("PATCH", "/api/v1/automation/jobs/{id}"),
        ("DELETE", "/api/v1/automation/jobs/{id}"),
        ("GET", "/api/v1/automation/jobs/{id}/runs"),
        ("GET", "/api/v1/calendar/events"),
    ];

    /// The API routes.
    pub fn router(&self) -> Router {
        use crate::api::limits::{body_limit, header_limits, json_errors};
        use axum::middleware::from_fn;
        let http = &self.options.http;
        let run_body = || {
            from_fn(body_limit(
                MAX_PAYLOAD_BYTES,
                "RunAgentInput payload exceeds size limit",
            ))
        };
        let agui_body = from_fn(body_limit(
            self.options.agui_max_payload_bytes,
            "RunAgentInput payload exceeds size limit",
        ));
        let upload_limit = self
            .attachments
            .as_ref()
            .map_or(0, |a| a.max_bytes + attachments::MULTIPART_OVERHEAD);
        let upload_body = from_fn(body_limit(upload_limit, "attachment exceeds size limit"));
        // Routes with a body limit of their own (runs, uploads); the rest
        // take small JSON documents at most.
        let sized = Router::new()
            .route("/api/v1/agui", post(agui::post_agui).layer(agui_body))
            .route("/api/v1/agent/runs", post(runs::post_run).layer(run_body()))
            .route(
                "/api/v1/agent/attachments",
                post(attachments::upload).layer(upload_body),
            );
        let small = Router::new()
            .route("/healthz", get(ops::health))
            .route("/metrics", get(ops::metrics))
            .route("/openapi.json", get(ops::openapi))
            .route("/api/v1/agent/runs/{run_id}", get(runs::get_run))
            .route("/api/v1/agent/runs/{run_id}/events", get(runs::get_events))
            .route("/api/v1/agent/runs/{run_id}/cancel", post(runs::cancel_run))
            .route("/api/v1/agent/history", get(history::get_history))
            .route(
                "/api/v1/me/profile",
                get(profile::get_profile).patch(profile::patch_profile),
            )
            .route("/api/v1/agent/attachments/{id}", get(attachments::download))
            .route(
                "/api/v1/automation/jobs",
                post(jobs::create).get(jobs::list),
            )
            .route(
                "/api/v1/automation/jobs/{id}",
                get(jobs::read).patch(jobs::update).delete(jobs::remove),
            )
            .route("/api/v1/automation/jobs/{id}/runs", get(jobs::runs))
            .route("/api/v1/calendar/events", get(calendar::list_events))
            .layer(from_fn(body_limit(
                http.max_body_bytes,
                "the request body exceeds the size limit",
            )));
        sized
            .merge(small)
            .with_state(self.clone())
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
            .layer(tower::util::option_layer(cors(&http.cors_allowed_origins)))
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(request_span)
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
/// their signature there) and request id.
fn request_span<B>(request: &Request<B>) -> tracing::Span {
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::info_span!(
        "request",
        method = %request.method(),
        path = request.uri().path(),
        request_id = id,
    )
}

/// One line per request, when its answer's head is sent (a stream's body
/// continues after it).
fn log_response<B>(response: &Response<B>, latency: Duration, _span: &tracing::Span) {
    tracing::info!(
        status = response.status().as_u16(),
        ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
        "request"
    );
}
