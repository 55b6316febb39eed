//! Serving a router on a TCP listener, with what every connection gets: a
//! deadline for its request headers (which is also its idle timeout),
//! bounded header buffers, TCP keep-alive to notice vanished peers, and a
//! graceful shutdown.
//!
//! `axum::serve` builds its connections without a timer, so hyper's header
//! timeout never runs there and a client that connects and sends nothing (or
//! half a request line) holds a connection forever; this is the loop with the
//! timer.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::config::HttpConfig;

/// hyper's own read-buffer cap. Headers past it get hyper's bare 431; the
/// configured (smaller) header limits answer JSON before it is reached.
const HYPER_MAX_BUF: usize = 256 * 1024;
/// hyper's own header-count cap (the configured limit is checked by the
/// router's layer, which can answer JSON).
const HYPER_MAX_HEADERS: usize = 1000;
/// How long open connections get to finish once the shutdown begins.
const SHUTDOWN_LINGER: Duration = Duration::from_secs(2);
/// TCP keep-alive probes find peers that vanished without a FIN.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// Serves `app` on `listener` until `shutdown` resolves, then stops
/// accepting and gives open connections two seconds to end.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    http: &HttpConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(http.header_read_timeout_seconds))
        .max_buf_size(HYPER_MAX_BUF)
        .max_headers(HYPER_MAX_HEADERS);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors and the like: wait instead of
                    // spinning; the connections that hold them will end.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.as_mut() => break,
        };
        let _ = stream.set_nodelay(true);
        let keepalive = socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE);
        let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive);
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            app.clone().oneshot(request.map(Body::new))
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_LINGER, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain; closing them");
    }
    Ok(())
}
