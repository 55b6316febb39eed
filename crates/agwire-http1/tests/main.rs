//! The integration tests of `agwire-http1`, one binary: hostile bytes on raw
//! TCP (`raw`), the per-peer share of the connections (`peers`), the
//! differential test against hyper (`differential`), and the fuzz corpora
//! replayed (`corpus`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod corpus;
mod differential;
mod peers;
mod raw;
