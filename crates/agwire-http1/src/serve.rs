//! [`serve`], [`serve_with`] and [`serve_connection`].

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

use crate::body::Body;
use crate::config::ServeConfig;
use crate::peers::{PeerKey, PeerShares, Refuser};
use crate::transport::Transport;
use crate::{BoxError, conn};

/// Serves `service` on `listener` until `shutdown` completes, then lets
/// every open connection finish its response and returns. Each connection
/// gets the limits of [`ServeConfig::default`]; [`serve_with`] takes
/// others.
///
/// ```no_run
/// # async fn run(app: axum::Router) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
/// agwire_http1::serve(listener, app, async {
///     let _ = tokio::signal::ctrl_c().await;
/// })
/// .await
/// # }
/// ```
pub async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError> + Send,
{
    serve_with(listener, service, ServeConfig::default(), shutdown).await
}

/// [`serve`] with the given limits and timeouts for each connection.
/// Responses are written without Nagle's delay (`TCP_NODELAY`): events are
/// small and must not wait. Each request carries the client's address as
/// a [`PeerAddr`](crate::PeerAddr) extension. A connection past its
/// address's share ([`ServeConfig::max_connections_per_peer`]) is answered
/// `503` at once and closed, without holding one of the
/// [`max_connections`](ServeConfig::max_connections) slots.
pub async fn serve_with<S, B>(
    listener: TcpListener,
    service: S,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError> + Send,
{
    let config = Arc::new(config);
    let connections = TaskTracker::new();
    let draining = CancellationToken::new();
    let slots = config
        .max_connections
        .map(|n| Arc::new(Semaphore::new(n.max(1))));
    let peers = config.peer_share().map(PeerShares::new);
    let mut refuser = Refuser::default();
    let mut shutdown = pin!(shutdown);
    loop {
        // Past the limit the listener is not read: new clients wait in the
        // kernel's accept queue until a connection closes.
        let permit = match &slots {
            Some(slots) => tokio::select! {
                permit = slots.clone().acquire_owned() => permit.ok(),
                () = &mut shutdown => break,
            },
            None => None,
        };
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
        let slot = match &peers {
            None => None,
            Some(peers) => {
                let key = PeerKey::from(peer.ip());
                let Some(slot) = peers.admit(key) else {
                    // A refusal is not a connection served: its global slot
                    // goes back now, not after the answer.
                    drop(permit);
                    refuser.refuse(tcp, key, peers.share(), &config, &draining, &connections);
                    continue;
                };
                Some(slot)
            }
        };
        let _ = tcp.set_nodelay(true);
        if let Some(idle) = config.tcp_keepalive {
            let keepalive = socket2::TcpKeepalive::new().with_time(idle);
            let _ = socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive);
        }
        let service = service.clone();
        let config = config.clone();
        let draining = draining.clone();
        connections.spawn(async move {
            conn::connection(tcp, Some(peer), service, &config, &draining).await;
            // Also dropped with the task if the connection panics.
            drop((slot, permit));
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

/// Serves one connection over any [`Transport`] (a TLS stream, a Unix
/// socket) until it closes: what [`serve_with`] runs for each TCP
/// connection it accepts.
pub async fn serve_connection<T, S, B>(io: T, service: S, config: &ServeConfig)
where
    T: Transport,
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = bytes::Bytes>,
    B::Error: Into<BoxError>,
{
    conn::connection(io, None, service, config, &CancellationToken::new()).await;
}

/// Errors that concern one connection only, not the listener.
fn per_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    )
}
