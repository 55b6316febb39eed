//! [`serve`]: HTTP/1.1 for many long-lived event streams.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::http1::{self, ServeConfig};

/// Serves `app` on `listener` over HTTP/1.1 until `shutdown` completes, then
/// lets every open connection finish its response (as `axum::serve`'s
/// graceful shutdown does) and returns. Each connection gets the limits of
/// [`ServeConfig::default`]; [`serve_with`] takes others.
///
/// The difference from `axum::serve` is what a connection costs while a
/// stream is open: connections are this crate's own HTTP/1.1 (see
/// [`ServeConfig`]), which holds no buffer while a stream waits for its next
/// event — with 10,000 idle SSE streams open, about 5 KiB of resident memory
/// each, against about 21 KiB through `axum::serve` and 8.3 KiB for node
/// (`bench/http.sh`). HTTP/2 and protocol upgrades (WebSockets) are not
/// offered. Responses are written without Nagle's delay (`TCP_NODELAY`):
/// events are small and must not wait. Handlers can read the peer's address
/// as `axum::extract::ConnectInfo<SocketAddr>`.
///
/// ```no_run
/// # async fn run(app: axum::Router) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
/// agwire_server::serve(listener, app, async {
///     let _ = tokio::signal::ctrl_c().await;
/// })
/// .await
/// # }
/// ```
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with(listener, app, ServeConfig::default(), shutdown).await
}

/// [`serve`] with the given limits and timeouts for each connection.
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let config = Arc::new(config);
    let connections = TaskTracker::new();
    let draining = CancellationToken::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    if !per_connection(&error) {
                        // Out of file descriptors, typically: wait for some
                        // to close rather than spin.
                        tracing::error!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        if let Some(idle) = config.tcp_keepalive {
            let keepalive = socket2::TcpKeepalive::new().with_time(idle);
            let _ = socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive);
        }
        let app = app.clone();
        let config = config.clone();
        let draining = draining.clone();
        connections.spawn(async move {
            http1::connection(tcp, peer, app, &config, &draining).await;
        });
    }
    drop(listener);
    draining.cancel();
    connections.close();
    match config.drain_timeout {
        None => connections.wait().await,
        Some(limit) => {
            if tokio::time::timeout(limit, connections.wait())
                .await
                .is_err()
            {
                tracing::warn!(
                    open = connections.len(),
                    "connections still open after the drain; closing them"
                );
            }
        }
    }
    Ok(())
}

/// Errors that concern one connection only, not the listener.
fn per_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    )
}
