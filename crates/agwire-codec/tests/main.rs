//! The integration tests of `agwire-codec`, one binary: each file below is a
//! suite of its own (SSE and protobuf against the official encoders, the
//! frozen proto, negotiation, the fuzz corpus).

mod common;

mod fuzz_corpus;
mod negotiate_interop;
mod own_transport;
mod proto_codegen;
mod proto_direct;
mod proto_freeze;
mod proto_interop;
mod sse_decoder;
mod sse_interop;
