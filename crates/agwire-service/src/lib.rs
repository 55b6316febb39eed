#![doc = include_str!("../README.md")]

mod api;
pub mod attachments;
pub mod auth;
pub mod brain;
mod clock;
pub mod config;
mod error;
mod history;
mod jobs;
mod metrics;
pub mod runs;
pub mod server;
mod service;
pub mod store;
pub mod validate;

pub use brain::builtin::BuiltinAgent;
pub use config::Config;
pub use error::Error;
pub use service::Service;
