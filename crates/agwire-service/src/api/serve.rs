//! Serving a router on a TCP listener, with what every connection gets: a
//! deadline for its request headers (which is also its idle timeout), a
//! deadline for each write (a client that stops reading is disconnected),
//! bounded header buffers, a bounded number of connections (and a share of
//! them per client address), TCP keep-alive to notice vanished peers, and a
//! graceful shutdown.
//!
//! The connections are `agwire_http1`'s (through `agwire_server::serve_with`): an idle
//! event stream holds no buffer, and every connection has a deadline for its
//! request head — `axum::serve` has none, so a client that connects and
//! sends nothing (or half a request line) would hold a connection forever.

use std::future::Future;
use std::time::Duration;

use agwire_server::ServeConfig;
use axum::Router;
use tokio::net::TcpListener;

use crate::Service;

/// Room in a request head for its request line, beyond the configured
/// header bytes: the connection refuses a head past both (431, or 414 for a
/// request line that does not fit), and reads no more than that ahead — so
/// a connection sending a head holds at most `max_header_bytes` + 8 KiB
/// (+ the connection's 4 KiB of slack). The router's layer checks the
/// configured limits exactly (names and values) and answers the same 431.
const REQUEST_LINE_BYTES: usize = 8 * 1024;
/// How long open connections get to finish once the shutdown begins.
const SHUTDOWN_LINGER: Duration = Duration::from_secs(2);
/// TCP keep-alive probes find peers that vanished without a FIN.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

impl Service {
    /// Serves `app` (this service's [`router`](Service::router), or
    /// [`router_with`](Service::router_with) pages beside it) on `listener`
    /// with the service's HTTP settings, until `shutdown` resolves; then
    /// stops accepting and gives open connections two seconds to end.
    pub async fn serve(
        &self,
        listener: TcpListener,
        app: Router,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let http = &self.options.http;
        let config = ServeConfig::default()
            .header_read_timeout(Some(Duration::from_secs(http.header_read_timeout_seconds)))
            .write_timeout(Some(Duration::from_secs(http.write_timeout_seconds)))
            .max_head_bytes(http.max_header_bytes.saturating_add(REQUEST_LINE_BYTES))
            .max_headers(http.max_headers)
            .max_connections(Some(http.max_connections))
            .max_connections_per_peer(
                (http.max_connections_per_peer > 0).then_some(http.max_connections_per_peer),
            )
            .tcp_keepalive(Some(TCP_KEEPALIVE))
            .drain_timeout(Some(SHUTDOWN_LINGER));
        agwire_server::serve_with(listener, app, config, shutdown).await
    }
}
