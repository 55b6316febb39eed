//! The integration tests of `agwire-server`, one binary: the dojo's agents
//! (alone and against the official client), the endpoint, event streams and
//! the HTTP/1.1 connection over raw TCP.

mod dojo_scenarios;

mod dojo;
mod dojo_interop;
mod endpoint;
mod event_stream;
mod http1;
