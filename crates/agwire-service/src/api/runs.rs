//! `/api/v1/agent/runs` (the agent-run API): accept a run (202, or its stream when
//! asked), read it, stream or resume its events, cancel it.

use std::collections::HashMap;

use agwire_codec::negotiate::{Negotiator, WireFormat};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::doc::STREAM;
use super::doc::bodies::{Binary, RunAgentInputBody, SseFrame};
use super::error::Detail;
use super::multitask::RunQuery;
use super::stream::{accepted_stream, events_location, resume_after, traced_stream};
use super::validate::{MAX_PAYLOAD_BYTES, Rules, validate_run};
use super::{ApiError, ApiResult, BACKEND_TOOLS, User, now_ms};

use crate::engine::RunRecord;
use crate::run::{Admission, RunRequest, RunStatus};
use crate::service::Service;

/// Which format to stream in, if the request asks for a stream explicitly.
fn asked_stream(headers: &HeaderMap) -> Option<WireFormat> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    if !(accept.contains("text/event-stream")
        || accept.contains("application/vnd.ag-ui.event+proto"))
    {
        return None;
    }
    Some(Negotiator::new().choose(Some(accept)))
}

/// The answer to an accepted run.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = TaskAcceptedResponse)]
pub(super) struct TaskAccepted {
    task_id: String,
    thread_id: String,
    run_id: String,
    /// This request created the thread.
    created: bool,
}

/// A run's state.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Run)]
pub(super) struct RunView {
    task_id: String,
    thread_id: String,
    run_id: String,
    #[schema(value_type = RunStatusSchema)]
    status: RunStatus,
    /// ms since the epoch.
    created_at: i64,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<RunFailure>)]
    error: Option<Option<Value>>,
    /// `RUN_FINISHED.usage`: one AG-UI TokenUsage per model call.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    usage: Option<Option<Value>>,
}

/// [`RunStatus`] in the document (the store's type, drawn here: the
/// document is the API's): its names, every one ([`RunStatus::ALL`]).
struct RunStatusSchema;

impl utoipa::PartialSchema for RunStatusSchema {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .description(Some(
                "A run's state. `Queued` and `Running` are active; the rest are final, and\na final state never changes.",
            ))
            .enum_values(Some(RunStatus::ALL.map(RunStatus::as_str)))
            .into()
    }
}

impl ToSchema for RunStatusSchema {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("RunStatus")
    }
}

/// Why a run failed (its `RUN_ERROR`).
#[derive(ToSchema)]
#[allow(dead_code, reason = "a description: the stored JSON is sent as it is")]
struct RunFailure {
    message: String,
    code: Option<String>,
}

impl RunView {
    /// A run as the API shows it; `detailed` adds its error and usage.
    pub(super) fn new(run: &RunRecord, detailed: bool) -> Self {
        let stored = |text: Option<&str>| text.and_then(|t| serde_json::from_str::<Value>(t).ok());
        Self {
            task_id: run.task_id.clone(),
            thread_id: run.thread_id.clone(),
            run_id: run.run_id.clone(),
            status: run.status,
            created_at: run.created_at,
            started_at: run.started_at,
            finished_at: run.finished_at,
            error: detailed.then(|| stored(run.error.as_deref())),
            usage: detailed.then(|| stored(run.usage.as_deref())),
        }
    }
}

/// The answer to a cancel.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CancelRequested {
    run_id: String,
    /// Always true.
    cancel_requested: bool,
}

#[utoipa::path(
    post,
    path = "/api/v1/agent/runs",
    operation_id = "createRun",
    summary = "Accept a run",
    description = "Validates rule by rule, in a fixed order, before anything is written, appends the user message to its thread and creates the run in one transaction, and executes it in the background. With `Accept: text/event-stream` or `application/vnd.ag-ui.event+proto` the answer is the run's stream instead of 202. Re-posting the same body with the same threadId and runId answers the original acceptance (and stops nothing again). On a thread with an active run, `multitask_strategy` (default: the service's `runs.busy_thread`, `reject` unless configured) decides: `reject` is 409, `enqueue` accepts the run to wait for it, `interrupt` cancels the thread's active runs (a running one's stream ends with `RUN_FINISHED` outcome `cancelled`; what it said stays in the thread) and starts this run after them, `rollback` does the same and removes from the thread everything they added.",
    params(RunQuery),
    request_body(content = RunAgentInputBody, description = "At most 256 KiB.", content_type = "application/json"),
    responses(
        (status = 202, description = "Accepted", body = TaskAccepted,
            headers(("Location" = String, description = "/api/v1/agent/runs/{runId}/events"))),
        (status = 200, description = STREAM,
            content((SseFrame = "text/event-stream"), (Binary = "application/vnd.ag-ui.event+proto"))),
        (status = 404, description = "`thread not found` (another user's thread)", body = Detail),
        (status = 409, description = "`the thread already has an active run; wait for it or cancel it`, or `runId '<id>' was already used with a different request`", body = Detail),
        (status = 413, description = "`RunAgentInput payload exceeds size limit`", body = Detail),
        (status = 415, description = "`Content-Type must be application/json`", body = Detail),
        (status = 422, description = "`multitask_strategy must be one of reject, enqueue, interrupt, rollback`; then validation, first failing rule in this order: `invalid RunAgentInput: <what>`, `threadId must be a valid UUID`, `runId exceeds length limit`, `RunAgentInput.messages exceeds limit`, `RunAgentInput user message text exceeds limit`, `invalid RunAgentInput.forwardedProps`, `RunAgentInput.messages must contain exactly one user message`, `RunAgentInput.messages[0].role must be user`, `binary content requires image mimeType`, `binary content requires url`, `binary content data is not allowed`, `Too many attachments`, `binary content url is not a valid signed URL`, `invalid client_time.device_timezone`, `invalid client_time.client_now_iso`, `invalid client_time.client_epoch_ms`, `RunAgentInput.tools: '<name>' is the name of a backend tool; frontend tools must not reuse it`.", body = Detail),
        (status = 429, description = "`quota exceeded: <n> runs per minute` or `quota exceeded: <n> tokens per day` (the service's `[quotas]`), with `Retry-After` (seconds); checked after the re-post rule, so a re-post of an accepted run is answered again", body = Detail,
            headers(("Retry-After" = u64, description = "Seconds until a run would be accepted"))),
        (status = 503, description = "`the server is shutting down; retry shortly`", body = Detail),
    )
)]
pub(super) async fn post_run(
    State(service): State<Service>,
    User(user): User,
    Query(query): Query<RunQuery>,
    request: Request,
) -> ApiResult {
    let strategy = query.strategy(service.options.busy_thread)?;
    let headers = request.headers().clone();
    super::input::require_json(&headers)?;
    // One byte over the limit is enough to know.
    let body = super::limits::read_body(
        request.into_body(),
        MAX_PAYLOAD_BYTES + 1,
        "RunAgentInput payload exceeds size limit",
    )
    .await?;
    // (Scoped: `Rules` holds a `&dyn Fn`, which must not live across an await.)
    let now_s = now_ms() / 1000;
    // The bucket's presigned URLs the body names, checked (signature,
    // expiry, owner) before the synchronous validation judges each URL.
    let verified = match &service.attachments {
        Some(attachments) => {
            service
                .engine
                .verified_bucket_urls(attachments, &body, &user, now_s)
                .await?
        }
        None => Vec::new(),
    };
    let validated = {
        let attachments = service.attachments.as_ref();
        let signed =
            |url: &str| attachments.is_some_and(|a| a.accepts_url(url, &user, &verified, now_s));
        let rules = Rules {
            backend_tools: BACKEND_TOOLS,
            signed_url: &signed,
        };
        validate_run(&body, &rules)
    };
    let mut run = validated?;
    // Store references, not URLs: a URL expires, the attachment does not.
    if let Some(attachments) = &service.attachments {
        attachments.to_references(&mut run.input, &user, now_s);
    }
    let request = RunRequest {
        user,
        input: run.input,
        mode: Some(run.runtime_mode),
        options: run.options,
        admission: Admission {
            strategy,
            whole_history: false,
        },
    };
    if let Some(format) = asked_stream(&headers) {
        let accepted = service.engine.accept_following(request).await?;
        return accepted_stream(&service, accepted, &headers, format);
    }
    let accepted = service.engine.accept(request).await?;
    let location = events_location(&accepted.run_id);
    let mut response = (
        StatusCode::ACCEPTED,
        axum::Json(TaskAccepted {
            task_id: accepted.task_id,
            thread_id: accepted.thread_id,
            run_id: accepted.run_id,
            created: accepted.created,
        }),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// `user`'s run with this id, or 404.
async fn owned_run(service: &Service, user: &str, run_id: &str) -> ApiResult<RunRecord> {
    service
        .engine
        .run(user, run_id)
        .await?
        .ok_or_else(|| ApiError::not_found("run not found"))
}

#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{runId}",
    operation_id = "getRun",
    summary = "Run status",
    params(("runId" = String, Path, max_length = 128)),
    responses(
        (status = 200, description = "The run", body = RunView),
        (status = 404, description = "`run not found`", body = Detail),
    )
)]
pub(super) async fn get_run(
    State(service): State<Service>,
    User(user): User,
    Path(run_id): Path<String>,
) -> ApiResult<axum::Json<RunView>> {
    let run = owned_run(&service, &user, &run_id).await?;
    Ok(axum::Json(RunView::new(&run, true)))
}

#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{runId}/events",
    operation_id = "runEvents",
    summary = "Stream (or replay) a run's events",
    description = "Subscribes, backfills the log after `Last-Event-ID` (or `?after=`), then follows live events; ends after the terminal event. A finished run replays in full.",
    params(
        ("runId" = String, Path, max_length = 128),
        ("after" = Option<u64>, Query, minimum = 0),
        ("Last-Event-ID" = Option<String>, Header),
    ),
    responses(
        (status = 200, description = STREAM,
            content((SseFrame = "text/event-stream"), (Binary = "application/vnd.ag-ui.event+proto"))),
        (status = 400, description = "`Last-Event-ID / after must be an event sequence number`", body = Detail),
        (status = 404, description = "`run not found`", body = Detail),
    )
)]
pub(super) async fn get_events(
    State(service): State<Service>,
    User(user): User,
    Path(run_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult {
    let run = owned_run(&service, &user, &run_id).await?;
    let after = resume_after(&headers, query.get("after").map(String::as_str))?;
    let format = Negotiator::new()
        .prefer_sse_for_wildcards(true)
        .choose(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    Ok(traced_stream(&service, &run, after, format))
}

#[utoipa::path(
    post,
    path = "/api/v1/agent/runs/{runId}/cancel",
    operation_id = "cancelRun",
    summary = "Cancel a run",
    description = "Idempotent. A run that has not started ends at once (RUN_STARTED, RUN_FINISHED with outcome cancelled); a running one ends as cancelled with what it said; a finished one is unchanged.",
    params(("runId" = String, Path, max_length = 128)),
    responses(
        (status = 202, description = "Cancel requested", body = CancelRequested),
        (status = 404, description = "`run not found`", body = Detail),
    )
)]
pub(super) async fn cancel_run(
    State(service): State<Service>,
    User(user): User,
    Path(run_id): Path<String>,
) -> ApiResult {
    let run = owned_run(&service, &user, &run_id).await?;
    service.engine.cancel(&run).await?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(CancelRequested {
            run_id: run.run_id,
            cancel_requested: true,
        }),
    )
        .into_response())
}
