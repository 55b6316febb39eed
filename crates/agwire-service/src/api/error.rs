//! `ApiError`: every error the API answers, as JSON `{"detail": ...}` with
//! its status. Handlers return `Result<_, ApiError>` and use `?`; the
//! engine's [`Error`]s (its database's among them) map to statuses here,
//! in one place.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::{Error, StoreError};

/// An error answer: a status and the `detail` a client reads.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    detail: String,
    /// 401s say how to authenticate (`WWW-Authenticate: Bearer`).
    bearer: bool,
    /// 429s say when to try again (`Retry-After`, seconds).
    retry_after: Option<u64>,
}

/// The body of every error answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct Detail {
    /// What went wrong, for a person.
    pub(crate) detail: String,
}

/// What handlers return.
pub(crate) type ApiResult<T = Response> = Result<T, ApiError>;

impl ApiError {
    /// Its HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Its `detail`: the exact sentence a client reads.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// An answer with this status and detail.
    pub(crate) fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
            bearer: false,
            retry_after: None,
        }
    }

    /// 404.
    pub(crate) fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    /// 422: the request is well-formed but breaks a rule.
    pub(crate) fn unprocessable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    /// Its `Retry-After`, when it has one (seconds).
    pub fn retry_after(&self) -> Option<u64> {
        self.retry_after
    }

    /// 401, with `WWW-Authenticate: Bearer`.
    pub(crate) fn unauthorized(detail: impl Into<String>) -> Self {
        Self {
            bearer: true,
            ..Self::new(StatusCode::UNAUTHORIZED, detail)
        }
    }
}

/// Every sentence a client reads for an engine error.
impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        match error {
            Error::Store(StoreError::ThreadNotFound) => Self::not_found("thread not found"),
            Error::Store(StoreError::AttachmentNotFound) => Self::not_found("attachment not found"),
            Error::Store(StoreError::RunIdReused { run_id }) => Self::new(
                StatusCode::CONFLICT,
                format!("runId '{run_id}' was already used with a different request"),
            ),
            Error::Store(StoreError::RunIdInFlight { run_id }) => Self::new(
                StatusCode::CONFLICT,
                format!("runId '{run_id}' is being accepted by another request"),
            ),
            Error::Store(StoreError::ThreadBusy) => Self::new(
                StatusCode::CONFLICT,
                "the thread already has an active run; wait for it or cancel it",
            ),
            Error::Store(StoreError::RunNotRunning { task_id }) => Self::new(
                StatusCode::CONFLICT,
                format!("run {task_id} is not running"),
            ),
            Error::Store(StoreError::ToolCallNotPending { tool_call_id }) => Self::unprocessable(
                format!("tool call {tool_call_id} is not pending in this thread"),
            ),
            Error::Store(StoreError::ToolCallAnswered { tool_call_id }) => Self::new(
                StatusCode::CONFLICT,
                format!("tool call {tool_call_id} was already answered"),
            ),
            Error::Store(StoreError::ToolCallClosed { tool_call_id }) => Self::new(
                StatusCode::CONFLICT,
                format!(
                    "tool call {tool_call_id} is no longer pending: a later turn went on without answering it"
                ),
            ),
            Error::Store(StoreError::ToolCallExpired { tool_call_id }) => Self::new(
                StatusCode::CONFLICT,
                format!("tool call {tool_call_id} expired"),
            ),
            Error::Store(StoreError::QuotaExceeded {
                quota,
                retry_after_ms,
            }) => Self {
                // Whole seconds (RFC 9110), rounded up: a client that waits
                // that long is not refused again for the same count.
                retry_after: Some(
                    u64::try_from(retry_after_ms)
                        .unwrap_or(1)
                        .div_ceil(1000)
                        .max(1),
                ),
                ..Self::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("quota exceeded: {quota}"),
                )
            },
            Error::Store(StoreError::ThreadOfJob { job_id }) => Self::new(
                StatusCode::CONFLICT,
                format!("thread belongs to automation job {job_id}: delete the job first"),
            ),
            Error::Store(StoreError::JobThreadTaken) => Self::new(
                StatusCode::CONFLICT,
                "the job's thread id is already in use",
            ),
            Error::ShuttingDown | Error::Store(StoreError::ShuttingDown) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is shutting down; retry shortly",
            ),
            Error::Store(StoreError::Blobs(why)) => {
                // The cause (an address, a key id) is for the operator.
                tracing::error!(%why, "attachment bucket failed");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "attachment storage is unavailable; retry shortly",
                )
            }
            Error::Store(StoreError::LogUnavailable(why)) => {
                // The database's own words (addresses, names) are for the
                // operator.
                tracing::error!(%why, "the run log is unavailable");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "could not write to the run log; retry shortly",
                )
            }
            error => {
                // The cause is for the operator, not the client.
                tracing::error!(%error, "internal error");
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            axum::Json(Detail {
                detail: self.detail,
            }),
        )
            .into_response();
        if self.bearer {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the database said (an address, a user name) stays in the log.
    /// On a20bc6d4 a 503 carried it to the client.
    #[test]
    fn an_unavailable_log_does_not_tell_the_client_why() {
        let error = ApiError::from(Error::Store(StoreError::LogUnavailable(
            "error communicating with database: connection refused (10.0.0.5:5432, user agwire)"
                .into(),
        )));
        assert_eq!(error.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            error.detail,
            "could not write to the run log; retry shortly"
        );
    }
}
