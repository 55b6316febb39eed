#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod agent;
mod client;
mod error;
mod stream;
mod subscriber;
mod summary;

pub use agent::{AgentRun, HttpAgent, HttpAgentBuilder, RunOptions};
pub use client::{Accept, Client, ClientBuilder, Reconnect};
pub use error::Error;
pub use stream::{AbortHandle, RunStream};
pub use subscriber::{Hook, NoHooks, Subscriber};
pub use summary::RunSummary;

/// The protocol crate, re-exported so consumers need one dependency.
pub use agwire_core as core;
/// The HTTP client this crate is built on, re-exported so that a
/// [`ClientBuilder::http_client`] or a matched [`Error::Transport`] names the
/// same version (see [Semver](crate#semver)).
pub use reqwest;
