#![doc = include_str!("../README.md")]

mod error;
pub mod negotiate;
#[cfg(feature = "proto")]
pub mod proto;
pub mod sse;

pub use error::Error;
