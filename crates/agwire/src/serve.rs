//! `agwire serve`: the agent-run service on embedded SQLite.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agwire_service::store::Store;
use agwire_service::{BuiltinAgent, Service};
use axum::serve::ListenerExt;

/// Arguments of `agwire serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "AGWIRE_ADDR", default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Where the database (and later attachments) live.
    #[arg(long, env = "AGWIRE_DATA_DIR", default_value = "./agwire-data")]
    data_dir: PathBuf,
    /// HS256 secret of the bearer tokens (JWT, `sub` = user id, `exp`
    /// required) every request must carry; without it there is one local user.
    #[arg(long, env = "AGWIRE_JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,
    /// Allow a non-loopback address although authentication is not configured.
    #[arg(long)]
    insecure_no_auth: bool,
    /// How long running runs may take to finish on shutdown.
    #[arg(long, default_value = "10", value_name = "SECONDS")]
    grace: u64,
}

pub(crate) async fn serve(args: ServeArgs) -> Result<(), String> {
    if !args.addr.ip().is_loopback() && !args.insecure_no_auth && args.jwt_secret.is_none() {
        return Err(format!(
            "refusing to listen on {} without authentication: use a loopback address, set --jwt-secret, or pass --insecure-no-auth",
            args.addr
        ));
    }
    std::fs::create_dir_all(&args.data_dir)
        .map_err(|e| format!("data dir {}: {e}", args.data_dir.display()))?;
    let db = args.data_dir.join("agwire.db");
    let store = Store::open(&db)
        .await
        .map_err(|e| format!("{}: {e}", db.display()))?;
    let attachments = agwire_service::attachments::Attachments::open(&args.data_dir)
        .map_err(|e| format!("attachments in {}: {e}", args.data_dir.display()))?;
    let auth = match &args.jwt_secret {
        Some(secret) => agwire_service::auth::Auth::jwt(secret.as_bytes().to_vec()),
        None => agwire_service::auth::Auth::none(),
    };
    let service = Service::new(store, Arc::new(BuiltinAgent))
        .with_attachments(attachments)
        .with_auth(auth);
    service.recover().await.map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| format!("{}: {e}", args.addr))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(%addr, data_dir = %args.data_dir.display(), "agwire serve listening (built-in agent, no LLM configured)");
    {
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), "listening http://{addr}");
    }
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let app = service.router();
    let draining = service.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            tracing::info!("shutting down: no new runs; cancelling the running ones");
            draining.cancel_all();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(args.grace);
            while draining.running() > 0 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .map_err(|e| e.to_string())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
