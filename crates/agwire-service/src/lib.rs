#![doc = include_str!("../README.md")]

mod error;
pub mod store;
pub mod validate;

pub use error::Error;
