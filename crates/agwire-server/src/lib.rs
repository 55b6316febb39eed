#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod agent;
mod context;
mod endpoint;
mod error;
mod intake;
mod queue;
mod response;
mod serve;

pub use agent::{Agent, BoxFuture, DynAgent};
pub use agwire_http1::{BodyError as RequestBodyError, ServeConfig};
pub use context::{DisconnectPolicy, RunContext};
pub use endpoint::{AgentEndpoint, DEFAULT_CHANNEL_CAPACITY, run_detached};
pub use error::{AgentError, Error};
pub use intake::{DEFAULT_MAX_BODY_BYTES, Intake, IntakeError};
pub use queue::{Closed, EventReceiver, EventSender, Room, event_queue};
pub use response::{DEFAULT_KEEP_ALIVE, EventStream, Receiver};
pub use serve::{serve, serve_with};

/// The token a run is cancelled with ([`run_detached`]).
pub use tokio_util::sync::CancellationToken;

/// The protocol crate, re-exported so agents need one dependency.
pub use agwire_core as core;

/// The `http` crate (through axum) whose types agents meet in
/// [`RunContext::request`]: re-exported so they name the same version.
pub use axum::http;
