//! [`serve`]: an axum app on `agwire_http1`'s connections.

use std::future::Future;
use std::net::SocketAddr;

use agwire_http1::{PeerAddr, ServeConfig};
use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::Request;
use tokio::net::TcpListener;
use tower::ServiceExt as _;

/// Serves `app` on `listener` over HTTP/1.1 until `shutdown` completes, then
/// lets every open connection finish its response (as `axum::serve`'s
/// graceful shutdown does) and returns. Each connection gets the limits of
/// [`ServeConfig::default`]; [`serve_with`] takes others.
///
/// The difference from `axum::serve` is what a connection costs while a
/// stream is open: connections are [`agwire_http1`]'s, which hold no buffer
/// while a stream waits for its next event — with 10,000 idle SSE streams
/// open, about 5 KiB of resident memory each, against about 14 KiB through
/// hyper's connection and 8.4 KiB for node (`bench/http.sh`) — and parse as
/// strictly as hyper. HTTP/2 and protocol upgrades (WebSockets) are not
/// offered. Handlers can read the peer's address as
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
    serve_with(listener, app, ServeConfig::default(), shutdown).await
}

/// [`serve`] with the given limits and timeouts for each connection.
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let app = app.map_request(|mut request: Request<agwire_http1::Body>| {
        if let Some(&PeerAddr(peer)) = request.extensions().get::<PeerAddr>() {
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(peer));
        }
        request
    });
    agwire_http1::serve_with(listener, app, config, shutdown).await
}
