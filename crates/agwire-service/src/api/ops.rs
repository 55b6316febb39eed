//! For operators: `/healthz`, `/metrics` (Prometheus text), `/openapi.json`.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Uri, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, ApiResult, authenticate};
use crate::service::Service;

/// The service is up.
#[derive(Serialize, ToSchema)]
pub(super) struct Health {
    /// Always `ok`.
    status: &'static str,
    /// What executes runs (`builtin`, `scripted`, a provider:model).
    agent: String,
    /// What an operator should know about it (the scripted model is not a
    /// language model, and how to get one).
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    /// Which database holds the runs: `sqlite` (embedded) or `postgres`.
    database: &'static str,
    /// Which replica answered (several processes on one PostgreSQL
    /// database); absent on an embedded database.
    #[serde(skip_serializing_if = "Option::is_none")]
    replica: Option<String>,
}

#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "health",
    summary = "Liveness",
    responses((status = 200, description = "Up", body = Health))
)]
pub(super) async fn health(State(service): State<Service>) -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok",
        agent: service.engine.brain.describe(),
        note: service.engine.brain.note(),
        database: service.engine.database(),
        replica: service.engine.replica_id(),
    })
}

/// What a path no route serves answers: a JSON 404 naming what was asked
/// (the path only: a query may carry a signature). Its detail starts with
/// "no endpoint", so a client can tell a missing route from a missing
/// resource.
pub(super) async fn no_endpoint(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("no endpoint {method} {}", uri.path()))
}

#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    summary = "Prometheus metrics",
    description = "Text exposition 0.0.4: `agwire_runs{status}` (gauge, from the store), `agwire_runs_accepted_total`, `agwire_events_appended_total`, `agwire_tool_calls_expired_total`, `agwire_webhook_deliveries_total{outcome}`, `agwire_webhooks_pending` (with webhooks on), `agwire_active_streams`, `agwire_event_append_seconds` (histogram of one batch append). Needs a token when auth is on unless `metrics.public = true`.",
    responses((status = 200, description = "Metrics", content_type = "text/plain; version=0.0.4; charset=utf-8", body = String))
)]
pub(super) async fn metrics(State(service): State<Service>, headers: HeaderMap) -> ApiResult {
    if !service.options.metrics_public {
        authenticate(&headers, &service).await?;
    }
    let runs = service.engine.status_counts().await?;
    let webhooks_pending = match service.webhooks {
        Some(_) => Some(service.engine.webhooks_pending().await?),
        None => None,
    };
    let text = service.engine.metrics.render(
        &runs,
        crate::metrics::Held {
            executing: service.running(),
            live_channels: service.engine.hub.len(),
            webhooks_pending,
            spans: service
                .engine
                .telemetry
                .counts()
                .map(|c| crate::metrics::SpansExported {
                    exported: c.exported(),
                    export_failed: c.failed(),
                    queue_full: c.queue_full(),
                }),
        },
    );
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response())
}

/// The API description, generated when the router is built
/// ([`super::doc`]; `docs/API.md` is its prose twin).
#[derive(Clone)]
pub(super) struct Document(pub(super) axum::body::Bytes);

#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openapi",
    summary = "This document",
    responses((status = 200, description = "OpenAPI 3.1", body = Object))
)]
pub(super) async fn openapi(
    axum::extract::Extension(document): axum::extract::Extension<Document>,
) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        document.0,
    )
}
