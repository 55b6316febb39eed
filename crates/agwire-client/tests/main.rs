//! The integration tests of `agwire-client`, one binary: the client against
//! real servers, and against the official peers.

mod client;
mod peers_interop;
