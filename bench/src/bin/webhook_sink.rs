//! A webhook receiver for `bench/service.sh` with webhooks on: answers every
//! `POST` with 204 at once and counts them, so what the bench measures is
//! the service's side of delivery, not a receiver's.
//!
//! Usage: `webhook_sink`; prints `listening http://127.0.0.1:<port>` first,
//! and the count of deliveries on `GET /count`.
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::StatusCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let received = Arc::new(AtomicU64::new(0));
    let counted = received.clone();
    let app = axum::Router::new()
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
