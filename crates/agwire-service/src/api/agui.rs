//! `POST /api/v1/agui`: a standard AG-UI endpoint. The whole conversation
//! comes in every request, as `HttpAgent` and CopilotKit send it; same runs,
//! log and threads as the seed-004 endpoint, without its single-turn rules.

use agwire_codec::negotiate::Negotiator;
use agwire_core::RunAgentInput;
use agwire_server::{Intake, IntakeError};
use axum::extract::{Request, State};
use axum::http::StatusCode;

use super::stream::stream;
use super::{ApiError, ApiResult, BACKEND_TOOLS, User};
use crate::config::BusyThread;
use crate::runs::RunRequest;
use crate::service::Service;
use crate::store::Admission;

/// Longest thread or run id `/api/v1/agui` takes (ids are opaque there).
const MAX_AGUI_ID: usize = 128;
/// Most messages one `/api/v1/agui` request may carry.
const MAX_AGUI_MESSAGES: usize = 2000;

/// The rules a standard request must meet (the seed endpoint's are in
/// [`crate::validate`]).
fn check(input: &RunAgentInput) -> Result<(), ApiError> {
    let rejection = if input.thread_id.is_empty() || input.thread_id.chars().count() > MAX_AGUI_ID {
        Some("threadId must be 1 to 128 characters")
    } else if input.run_id.is_empty() {
        Some("runId must not be empty")
    } else if input.run_id.chars().count() > MAX_AGUI_ID {
        Some("runId exceeds length limit")
    } else if input.messages.len() > MAX_AGUI_MESSAGES {
        Some("RunAgentInput.messages exceeds limit")
    } else {
        None
    };
    if let Some(message) = rejection {
        return Err(ApiError::unprocessable(message));
    }
    if let Some(tool) = input
        .tools
        .iter()
        .find(|t| BACKEND_TOOLS.contains(&t.name.as_str()))
    {
        return Err(ApiError::unprocessable(format!(
            "RunAgentInput.tools: '{}' is the name of a backend tool; frontend tools must not reuse it",
            tool.name
        )));
    }
    Ok(())
}

/// agwire-server's intake (content type, declared and read length, JSON,
/// `Accept` negotiation with `*/*` read as SSE), answered with this API's
/// messages.
fn intake(service: &Service) -> Intake {
    Intake::new()
        .max_body_bytes(service.options.agui_max_payload_bytes)
        .require_content_type(true)
        // `*/*` (curl, fetch without headers) reads best as SSE; HttpAgent
        // names its types explicitly.
        .negotiator(Negotiator::new().prefer_sse_for_wildcards(true))
}

impl From<IntakeError> for ApiError {
    fn from(error: IntakeError) -> Self {
        match error {
            IntakeError::PayloadTooLarge { .. } => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RunAgentInput payload exceeds size limit",
            ),
            IntakeError::UnsupportedMediaType => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Content-Type must be application/json",
            ),
            IntakeError::InvalidJson(why) | IntakeError::InvalidInput(why) => {
                ApiError::unprocessable(format!("invalid RunAgentInput: {why}"))
            }
            IntakeError::Unreadable(why) => ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("could not read the request body: {why}"),
            ),
            other => ApiError::new(other.status(), other.detail()),
        }
    }
}

pub(super) async fn post_agui(
    State(service): State<Service>,
    User(user): User,
    request: Request,
) -> ApiResult {
    let (body, format) = intake(&service).json(request).await?;
    let input: RunAgentInput = serde_json::from_value(body)
        .map_err(|error| ApiError::unprocessable(format!("invalid RunAgentInput: {error}")))?;
    check(&input)?;
    let request = RunRequest {
        user,
        input,
        mode: None,
        client_time: None,
        admission: Admission {
            enqueue: service.options.busy_thread == BusyThread::Enqueue,
            whole_history: true,
        },
    };
    let accepted = service.engine.accept(request).await?;
    Ok(stream(&service, accepted.task_id, 0, format))
}
