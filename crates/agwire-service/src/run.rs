//! What a run is, for every part of the service: the request the engine
//! accepts ([`RunRequest`]); how it is admitted, its options to its thread, what
//! `forwardedProps` told about it and its state are the store's types
//! (re-exported here). The API's validation produces these; the store, the
//! engine, the brain, the jobs and the clock read them — and none of them
//! reads the validator.

use agwire_core::RunAgentInput;

pub use agwire_store::{
    Admission, ClientTime, ClientTimeField, MultitaskStrategy, RunOptions, RunStatus, RuntimeMode,
};

/// A validated run, ready to be accepted: who asks, what, and what
/// validation established about it.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Its owner.
    pub user: String,
    /// What it runs.
    pub input: RunAgentInput,
    /// `forwardedProps.runtime_mode` (`None` on the standard AG-UI endpoint).
    pub mode: Option<RuntimeMode>,
    /// What else `forwardedProps` said about it, checked.
    pub options: RunOptions,
    /// Busy-thread and history rules.
    pub admission: Admission,
}
