//! The run engine: accept, claim, execute, end, cancel, follow.

pub(crate) mod hub;
