//! [`serve`]: HTTP/1.1 for many long-lived event streams.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

/// Serves `app` on `listener` over HTTP/1.1 until `shutdown` completes, then
/// lets every open connection finish its response (as `axum::serve`'s
/// graceful shutdown does) and returns.
///
/// The difference from `axum::serve` is what a connection costs while a
/// stream is open: `axum::serve` runs each connection through hyper-util's
/// protocol-detecting builder (HTTP/1 or HTTP/2), which keeps extra buffers
/// per connection; this runs hyper's HTTP/1.1 connection directly. With
/// 10,000 idle streams open that is about 11 KiB of resident memory per
/// connection instead of about 21 KiB (`bench/http.sh`). HTTP/1.1 upgrades
/// (WebSockets) work; HTTP/2 is not offered. Responses are written without
/// Nagle's delay (`TCP_NODELAY`): events are small and must not wait.
/// Handlers can read the peer's address as
/// `axum::extract::ConnectInfo<SocketAddr>`.
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
        let service = app
            .clone()
            .map_request(move |mut request: axum::http::Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            });
        let draining = draining.clone();
        connections.spawn(async move {
            let service = TowerToHyperService::new(service);
            let mut connection = pin!(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .with_upgrades()
            );
            let result = tokio::select! {
                result = connection.as_mut() => result,
                () = draining.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = result {
                tracing::trace!(%error, "connection ended with an error");
            }
        });
    }
    draining.cancel();
    connections.close();
    connections.wait().await;
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
