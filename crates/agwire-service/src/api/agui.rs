//! `POST /api/v1/agui`: a standard AG-UI endpoint. The whole conversation
//! comes in every request, as `HttpAgent` and CopilotKit send it; same runs,
//! log and threads as `/api/v1/agent/runs`, without its single-turn rules.

use agwire_codec::negotiate::Negotiator;
use agwire_core::RunAgentInput;
use agwire_server::{Intake, IntakeError};
use axum::extract::{Query, Request, State};
use axum::http::StatusCode;

use super::doc::STREAM;
use super::doc::bodies::{Binary, RunAgentInputBody, SseFrame};
use super::error::Detail;
use super::multitask::RunQuery;
use super::stream::accepted_stream;
use super::{ApiError, ApiResult, BACKEND_TOOLS, User};
use crate::run::{Admission, RunOptions, RunRequest};
use crate::service::Service;

/// Longest thread or run id `/api/v1/agui` takes (ids are opaque there).
const MAX_AGUI_ID: usize = 128;
/// Most messages one `/api/v1/agui` request may carry.
const MAX_AGUI_MESSAGES: usize = 2000;

/// The rules a standard request must meet (`/api/v1/agent/runs`'s are in
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

#[utoipa::path(
    post,
    path = "/api/v1/agui",
    operation_id = "agui",
    summary = "Standard AG-UI endpoint (HttpAgent, CopilotKit)",
    description = "Any valid RunAgentInput carrying the whole conversation (camelCase or snake_case); ids are opaque strings of 1 to 128 characters; at most 2000 messages; body up to `runs.agui_max_payload_bytes` (1 MiB). Request messages whose id the thread does not hold yet are appended to it; the run is an ordinary run (same log, same history). The stream's `Location` is the run's events URL (GET it with `Last-Event-ID` to resume); re-posting the same request with `Last-Event-ID` resumes too, with exactly the events after that one. Wildcard `Accept` gets SSE.",
    request_body(content = RunAgentInputBody, content_type = "application/json"),
    responses(
        (status = 200, description = STREAM,
            content((SseFrame = "text/event-stream"), (Binary = "application/vnd.ag-ui.event+proto"))),
        (status = 404, description = "`thread not found` (another user's thread)", body = Detail),
        (status = 409, description = "`the thread already has an active run; wait for it or cancel it`, or `runId '<id>' was already used with a different request`", body = Detail),
        (status = 413, description = "`RunAgentInput payload exceeds size limit`", body = Detail),
        (status = 415, description = "`Content-Type must be application/json`", body = Detail),
        (status = 422, description = "`multitask_strategy must be one of reject, enqueue, interrupt, rollback`, `invalid RunAgentInput: <what>`, `threadId must be 1 to 128 characters`, `runId must not be empty`, `runId exceeds length limit`, `RunAgentInput.messages exceeds limit`, a frontend tool named like a backend tool, or `invalid RunAgentInput: <pointer> must not contain the NUL character (U+0000)`", body = Detail),
        (status = 429, description = "`quota exceeded: <n> runs per minute` or `quota exceeded: <n> tokens per day` (the service's `[quotas]`), with `Retry-After` (seconds); checked after the re-post rule, so a re-post of an accepted run is answered again", body = Detail,
            headers(("Retry-After" = u64, description = "Seconds until a run would be accepted"))),
        (status = 503, description = "`the server is shutting down; retry shortly`", body = Detail),
    )
)]
pub(super) async fn post_agui(
    State(service): State<Service>,
    User(user): User,
    Query(query): Query<RunQuery>,
    request: Request,
) -> ApiResult {
    let strategy = query.strategy(service.options.busy_thread)?;
    let headers = request.headers().clone();
    let (body, format) = intake(&service).json(request).await?;
    if let Some(at) = crate::storable::nul_in_value(&body, &mut String::new()) {
        return Err(ApiError::unprocessable(format!(
            "invalid RunAgentInput: {}",
            crate::storable::nul_detail(&at)
        )));
    }
    let input: RunAgentInput = serde_json::from_value(body)
        .map_err(|error| ApiError::unprocessable(format!("invalid RunAgentInput: {error}")))?;
    check(&input)?;
    let request = RunRequest {
        user,
        input,
        mode: None,
        options: RunOptions::default(),
        admission: Admission {
            strategy,
            whole_history: true,
        },
    };
    let accepted = service.engine.accept_following(request).await?;
    accepted_stream(&service, accepted, &headers, format)
}

#[utoipa::path(
    get,
    path = "/api/v1/agui/capabilities",
    operation_id = "aguiCapabilities",
    summary = "The agent's AG-UI capabilities",
    description = "An AG-UI 1.1 `AgentCapabilities` document for the agent behind `/api/v1/agui` and `/api/v1/agent/runs`: the transport (SSE and protobuf streams, resumable from `Last-Event-ID`), frontend tools and approvals, image input when attachments are enabled, and what the configured agents declare (the pipeline's backend tools with their argument schemas, its agents under `custom`). AG-UI leaves where the document is published to the server; `agwire check --capabilities <this URL>` judges it.",
    responses((status = 200, description = "`AgentCapabilities`", body = Object))
)]
pub(super) async fn capabilities(
    State(service): State<Service>,
    User(_user): User,
) -> axum::Json<agwire_core::AgentCapabilities> {
    axum::Json(crate::capabilities::document(&service))
}
