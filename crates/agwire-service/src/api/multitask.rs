//! `?multitask_strategy=`: what a run posted to a busy thread asks for
//! (LangGraph Platform's name and values), on both run endpoints. Given in
//! the query, not in `forwardedProps`, whose keys the agent-run API's
//! contract fixes; absent, the service's `runs.busy_thread` decides.

use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiError;
use crate::run::MultitaskStrategy;

/// The query of a run's POST.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RunQuery {
    /// What happens when the thread already has an active run: `reject`
    /// (409), `enqueue` (the run waits for it), `interrupt` (it is cancelled
    /// — its stream ends with `RUN_FINISHED` outcome `cancelled`, what it
    /// said stays in the thread — and this run starts after it) or
    /// `rollback` (the same, and everything it added to the thread is
    /// removed first). Default: the service's `runs.busy_thread`.
    #[param(value_type = Option<String>, pattern = "^(reject|enqueue|interrupt|rollback)$")]
    multitask_strategy: Option<String>,
}

impl RunQuery {
    /// The strategy asked for, `default` when none; an unknown one is 422.
    pub(super) fn strategy(
        &self,
        default: MultitaskStrategy,
    ) -> Result<MultitaskStrategy, ApiError> {
        match self.multitask_strategy.as_deref() {
            None => Ok(default),
            Some(name) => MultitaskStrategy::parse(name).ok_or_else(|| {
                ApiError::unprocessable(
                    "multitask_strategy must be one of reject, enqueue, interrupt, rollback",
                )
            }),
        }
    }
}
