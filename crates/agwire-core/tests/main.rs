//! The integration tests of `agwire-core`, one binary: each file below is a
//! suite of its own (the official spec data, conformance streams, the
//! differential tests against the official client).

mod common;

mod apply_conformance;
mod apply_rows;
mod chunk_conformance;
mod compact_rows;
mod conformance;
mod decode;
mod differential;
mod null_omission;
mod schema_fixtures;
mod verify_conformance;
mod verify_differential;
