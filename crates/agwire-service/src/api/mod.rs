//! The HTTP API: thin typed handlers over the run engine and the store.

pub(crate) mod jobs;
pub(crate) mod limits;
