#![doc = include_str!("../README.md")]

pub mod attachments;
pub mod auth;
mod builtin;
mod error;
pub mod history;
mod http;
mod hub;
pub mod store;
pub mod validate;

pub use builtin::BuiltinAgent;
pub use error::Error;
pub use http::Service;
