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
        authenticate(&parts.headers, service).map(User)
    }
}

/// The user a request's `Authorization` names (the local user when auth is
/// off).
fn authenticate(headers: &axum::http::HeaderMap, service: &Service) -> Result<String, ApiError> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    service
        .auth
        .user(authorization, now_ms() / 1000)
        .map_err(ApiError::unauthorized)
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
    }
}
