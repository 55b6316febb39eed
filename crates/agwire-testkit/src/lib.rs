//! The workspace's test kit: the helpers the integration tests of several
//! crates share, in one place instead of source files included across crates.
//!
//! Not published: a dev-dependency of the workspace's crates only. Each module
//! but [`peers`] is behind a feature of the same purpose, so a crate's tests
//! compile only the dependencies of the helpers they use.
//!
//! It depends on the crates whose tests use it (a dev-dependency cycle Cargo
//! allows): use it from integration tests (`tests/`), examples and fuzz
//! targets, never from a crate's unit tests in `src/`, where the crate under
//! test is a different compilation of itself and its types would not match.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    reason = "test helpers fail loudly, and announce skips on stderr"
)]

/// The dojo agents live beside the example that serves them, so the
/// published crate's example is whole; the tests run the same file.
#[cfg(feature = "dojo")]
#[path = "../../agwire-server/examples/dojo/agents.rs"]
pub mod dojo;
#[cfg(feature = "fuzz-checks")]
pub mod fuzz_checks;
#[cfg(feature = "http-agent")]
pub mod http_agent;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod peers;
#[cfg(feature = "pg")]
pub mod pg;
#[cfg(feature = "proto-oracle")]
pub mod proto_oracle;
#[cfg(feature = "raw-http")]
pub mod raw_http;
#[cfg(feature = "s3")]
pub mod s3;
#[cfg(feature = "streamgen")]
pub mod streamgen;
