#![doc = include_str!("../README.md")]

pub mod agents;
pub mod attachments;
pub mod auth;
mod builtin;
pub mod clock;
pub mod config;
pub mod demo;
mod error;
pub mod history;
mod http;
mod hub;
mod jobs;
mod metrics;
pub mod pipeline;
pub mod runtime;
pub mod schedule;
pub mod store;
pub mod tools;
pub mod ui_schema;
pub mod validate;

pub use builtin::BuiltinAgent;
pub use config::Config;
pub use error::Error;
pub use http::Service;
