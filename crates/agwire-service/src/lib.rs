#![doc = include_str!("../README.md")]

mod api;
mod assemble;
pub mod attachments;
pub mod auth;
pub mod brain;
mod capabilities;
mod clock;
pub mod config;
pub mod engine;
mod error;
mod history;
pub mod jobs;
mod metrics;
pub mod run;
mod service;
pub mod storable;
pub mod telemetry;
pub mod threads;
pub mod webhooks;

/// The store (re-exported: the service's persistence is `agwire-store`).
pub use agwire_store as store;

/// The run request's validation, answering the API's errors (the
/// integration tests judge it rule by rule).
pub use api::validate;

pub use api::ApiError;
pub use assemble::Storage;
pub use brain::builtin::BuiltinAgent;
pub use config::Config;
pub use error::{Error, StoreError};
pub use jobs::Scheduler;
pub use service::Service;
