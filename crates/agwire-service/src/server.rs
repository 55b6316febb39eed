//! Serving a router on a TCP listener, with what every connection gets: a
//! deadline for its request headers (which is also its idle timeout), a
//! deadline for each write (a client that stops reading is disconnected),
//! bounded header buffers, TCP keep-alive to notice vanished peers, and a
//! graceful shutdown.
//!
//! The connections are `agwire_server`'s HTTP/1.1 (`serve_with`): an idle
//! event stream holds no buffer, and every connection has a deadline for its
//! request head — `axum::serve` has none, so a client that connects and
//! sends nothing (or half a request line) would hold a connection forever.

use std::future::Future;
use std::time::Duration;

use agwire_server::ServeConfig;
use axum::Router;
use tokio::net::TcpListener;

use crate::config::HttpConfig;

/// The connection's own cap on a request head. Heads past it get a bare
/// 431; the configured (smaller) header limits answer JSON before it is
/// reached.
const MAX_HEAD_BYTES: usize = 256 * 1024;
/// The connection's own cap on the header count (the configured limit is
/// checked by the router's layer, which can answer JSON).
const MAX_HEADERS: usize = 1000;
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
    let config = ServeConfig::default()
        .header_read_timeout(Some(Duration::from_secs(http.header_read_timeout_seconds)))
        .write_timeout(Some(Duration::from_secs(http.write_timeout_seconds)))
        .max_head_bytes(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .tcp_keepalive(Some(TCP_KEEPALIVE))
        .drain_timeout(Some(SHUTDOWN_LINGER));
    agwire_server::serve_with(listener, app, config, shutdown).await
}
