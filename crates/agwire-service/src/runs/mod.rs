//! The run engine: accept, claim, execute, end, cancel, follow — and the hub
//! that carries live events from a run's executor to its followers.

mod engine;
pub(crate) mod hub;

pub(crate) use engine::now_ms;
pub use engine::{Engine, RunRequest};
