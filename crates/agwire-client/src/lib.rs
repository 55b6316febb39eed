#![doc = include_str!("../README.md")]

mod client;
mod error;
mod stream;
mod subscriber;
mod summary;

pub use client::{Accept, Client, ClientBuilder, Reconnect};
pub use error::Error;
pub use stream::{AbortHandle, RunStream};
pub use subscriber::{Hook, NoHooks, Subscriber};
pub use summary::RunSummary;

/// The protocol crate, re-exported so consumers need one dependency.
pub use agwire_core as core;
