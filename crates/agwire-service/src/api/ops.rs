//! For operators: `/healthz`, `/metrics` (Prometheus text), `/openapi.json`.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::IntoResponse;
use serde_json::json;

use super::{ApiResult, authenticate};
use crate::service::Service;

pub(super) async fn health(State(service): State<Service>) -> impl IntoResponse {
    axum::Json(json!({"status": "ok", "agent": service.engine.brain.describe()}))
}

pub(super) async fn metrics(State(service): State<Service>, headers: HeaderMap) -> ApiResult {
    if !service.options.metrics_public {
        authenticate(&headers, &service).await?;
    }
    let runs = service.engine.store.status_counts().await?;
    let text = service.engine.metrics.render(
        &runs,
        crate::metrics::Held {
            executing: service.running(),
            live_channels: service.engine.hub.len(),
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

/// The API description (`docs/API.md` is its prose twin).
const OPENAPI: &str = include_str!("../openapi.json");

pub(super) async fn openapi() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI,
    )
}
