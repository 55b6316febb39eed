//! The integration tests of `agwire-client`, one binary: the client against
//! real servers, and against the official peers.

mod chat_example;
mod client;
mod http_agent;
mod peers_interop;
