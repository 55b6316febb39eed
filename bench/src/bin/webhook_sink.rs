//! A webhook receiver for `bench/service.sh` with webhooks on: answers every
//! `POST` with 204 at once and counts them, so what the bench measures is
//! the service's side of delivery, not a receiver's. With telemetry on, it
//! is the OTLP/HTTP collector too: `/v1/traces` and `/v1/metrics` answered
//! 200 (an empty export response) unread, and counted.
//!
//! Usage: `webhook_sink`; prints `listening http://127.0.0.1:<port>` first,
//! the count of deliveries on `GET /count`, of OTLP exports on
//! `GET /otlp-count`.
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::StatusCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let received = Arc::new(AtomicU64::new(0));
    let counted = received.clone();
    let exports = Arc::new(AtomicU64::new(0));
    let (traces, metrics, exported) = (exports.clone(), exports.clone(), exports);
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            axum::routing::post(move || {
                traces.fetch_add(1, Ordering::Relaxed);
                async { StatusCode::OK }
            }),
        )
        .route(
            "/v1/metrics",
            axum::routing::post(move || {
                metrics.fetch_add(1, Ordering::Relaxed);
                async { StatusCode::OK }
            }),
        )
        .route(
            "/otlp-count",
            axum::routing::get(move || {
                let n = exported.load(Ordering::Relaxed);
                async move { n.to_string() }
            }),
        )
        .route(
            "/hook",
            axum::routing::post(move || {
                received.fetch_add(1, Ordering::Relaxed);
                async { StatusCode::NO_CONTENT }
            }),
        )
        .route(
            "/count",
            axum::routing::get(move || {
                let n = counted.load(Ordering::Relaxed);
                async move { n.to_string() }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening http://{}", listener.local_addr()?);
    axum::serve(listener, app).await
}
