//! `/api/v1/agent/threads`: the user's threads — list them, read one with
//! the frontend tool calls it waits on, rename, delete. The rules live in
//! [`crate::threads`].

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::error::Detail;
use super::input::JsonBody;
use super::{ApiError, ApiResult, User};
use crate::service::Service;
use crate::threads::{
    DEFAULT_PAGE, MAX_PAGE, PendingToolCall, ThreadRecord, check_title, parse_cursor, title,
};

/// RFC 3339 (UTC) for ms since the epoch.
fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| String::new(), |t| t.to_string())
}

/// A thread as its owner's list shows it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Thread)]
pub(super) struct ThreadView {
    thread_id: String,
    /// The owner's title when `titleSet`, else the first line of the first
    /// user message (at most 80 characters, then "…"), else "".
    title: String,
    /// Whether `title` is one the owner gave.
    title_set: bool,
    #[schema(format = DateTime)]
    created_at: String,
    /// When a run was last accepted on it.
    #[schema(format = DateTime)]
    last_active_at: String,
    /// Its active run (queued or running): follow it at
    /// `/api/v1/agent/runs/{runId}/events`.
    active_run_id: Option<String>,
    /// The automation job whose runs go to it.
    automation_job_id: Option<String>,
}

impl ThreadView {
    fn new(thread: &ThreadRecord) -> Self {
        Self {
            thread_id: thread.thread_id.clone(),
            title: title(thread),
            title_set: thread.title.is_some(),
            created_at: rfc3339(thread.created_at),
            last_active_at: rfc3339(thread.last_active_at),
            active_run_id: thread.active_run_id.clone(),
            automation_job_id: thread.job_id.clone(),
        }
    }
}

/// A page of the user's threads, most recently active first.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ThreadPage)]
pub(super) struct ThreadPageView {
    threads: Vec<ThreadView>,
    /// The next page's `cursor`; `null` on the last page.
    next_cursor: Option<String>,
}

/// A frontend tool call waiting for the user's answer: answer it with a
/// tool message (`toolCallId`) in the thread's next turn, once.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PendingToolCall)]
pub(super) struct PendingToolCallView {
    tool_call_id: String,
    name: String,
    /// The argument text as the model wrote it (JSON by convention).
    arguments: String,
    /// The run that asked.
    run_id: String,
    #[schema(format = DateTime)]
    asked_at: String,
    /// When it expires (`runs.pending_tool_call_ttl` after it was asked):
    /// an answer after then is 409 `tool call <id> expired`, and the call is
    /// no longer listed. `null` for a call asked before expiry existed.
    #[schema(format = DateTime)]
    expires_at: Option<String>,
}

impl From<PendingToolCall> for PendingToolCallView {
    fn from(call: PendingToolCall) -> Self {
        Self {
            tool_call_id: call.tool_call_id,
            name: call.name,
            arguments: call.arguments,
            run_id: call.run_id,
            asked_at: rfc3339(call.asked_at),
            expires_at: call.expires_at.map(rfc3339),
        }
    }
}

/// A thread with the frontend tool calls it waits on.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ThreadDetail)]
pub(super) struct ThreadDetail {
    #[serde(flatten)]
    thread: ThreadView,
    /// Oldest first; empty when nothing waits. A call stays pending until
    /// the thread's next turn, which answers it or goes on without it.
    pending_tool_calls: Vec<PendingToolCallView>,
}

/// The list's query.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Threads per page, 1 to 100 (default 30).
    limit: Option<String>,
    /// The previous page's `nextCursor`.
    cursor: Option<String>,
}

/// A rename.
#[derive(ToSchema)]
#[allow(
    dead_code,
    reason = "a description: the body is read as JSON and checked by hand"
)]
struct ThreadPatch {
    /// 1 to 200 characters on one line (trimmed); `null` goes back to the
    /// title the first user message gives.
    title: Option<String>,
}

/// `user`'s thread, or 404.
async fn owned(service: &Service, user: &str, thread_id: &str) -> ApiResult<ThreadRecord> {
    service
        .engine
        .thread(user, thread_id)
        .await?
        .ok_or_else(|| ApiError::not_found("thread not found"))
}

#[utoipa::path(
    get,
    path = "/api/v1/agent/threads",
    operation_id = "listThreads",
    summary = "The user's threads",
    description = "Most recently active first (then by id), a page at a time: pass `nextCursor` as `cursor` for the next.",
    params(ListQuery),
    responses(
        (status = 200, description = "A page", body = ThreadPageView),
        (status = 422, description = "`limit must be an integer from 1 to 100`, `invalid cursor`", body = Detail),
    )
)]
pub(super) async fn list(
    State(service): State<Service>,
    User(user): User,
    Query(query): Query<ListQuery>,
) -> ApiResult<axum::Json<ThreadPageView>> {
    let limit = match query.limit.as_deref() {
        None => DEFAULT_PAGE,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                ApiError::unprocessable(format!("limit must be an integer from 1 to {MAX_PAGE}"))
            })?,
    };
    let after = query
        .cursor
        .as_deref()
        .map(|c| parse_cursor(c).ok_or_else(|| ApiError::unprocessable("invalid cursor")))
        .transpose()?;
    let page = service.engine.thread_page(&user, after, limit).await?;
    Ok(axum::Json(ThreadPageView {
        threads: page.threads.iter().map(ThreadView::new).collect(),
        next_cursor: page.next_cursor,
    }))
}

#[utoipa::path(
    get,
    path = "/api/v1/agent/threads/{threadId}",
    operation_id = "getThread",
    summary = "A thread and the tool calls it waits on",
    params(("threadId" = String, Path)),
    responses(
        (status = 200, description = "The thread", body = ThreadDetail),
        (status = 404, description = "`thread not found`", body = Detail),
    )
)]
pub(super) async fn read(
    State(service): State<Service>,
    User(user): User,
    Path(thread_id): Path<String>,
) -> ApiResult<axum::Json<ThreadDetail>> {
    let thread = owned(&service, &user, &thread_id).await?;
    let pending = service.engine.pending_tool_calls(&thread).await?;
    Ok(axum::Json(ThreadDetail {
        thread: ThreadView::new(&thread),
        pending_tool_calls: pending.into_iter().map(Into::into).collect(),
    }))
}

#[utoipa::path(
    patch,
    path = "/api/v1/agent/threads/{threadId}",
    operation_id = "renameThread",
    summary = "Rename a thread",
    params(("threadId" = String, Path)),
    request_body(content = ThreadPatch, content_type = "application/json"),
    responses(
        (status = 200, description = "The thread", body = ThreadView),
        (status = 404, description = "`thread not found`", body = Detail),
        (status = 422, description = "`the body must be a JSON object`, `unknown thread field '<key>'`, `title is required`, `title must be a string or null`, `title must be 1 to 200 characters`, `title must be one line (no line breaks or control characters)`", body = Detail),
    )
)]
pub(super) async fn rename(
    State(service): State<Service>,
    User(user): User,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<axum::Json<ThreadView>> {
    let Ok(Value::Object(patch)) = serde_json::from_slice::<Value>(&body) else {
        return Err(ApiError::unprocessable("the body must be a JSON object"));
    };
    if let Some(key) = patch.keys().find(|k| *k != "title") {
        return Err(ApiError::unprocessable(format!(
            "unknown thread field '{key}'"
        )));
    }
    let title = match patch.get("title") {
        None => return Err(ApiError::unprocessable("title is required")),
        Some(Value::Null) => None,
        Some(Value::String(text)) => Some(check_title(text).map_err(ApiError::unprocessable)?),
        Some(_) => {
            return Err(ApiError::unprocessable("title must be a string or null"));
        }
    };
    if !service
        .engine
        .rename_thread(&user, &thread_id, title)
        .await?
    {
        return Err(ApiError::not_found("thread not found"));
    }
    let thread = owned(&service, &user, &thread_id).await?;
    Ok(axum::Json(ThreadView::new(&thread)))
}

#[utoipa::path(
    delete,
    path = "/api/v1/agent/threads/{threadId}",
    operation_id = "deleteThread",
    summary = "Delete a thread",
    description = "Cancels its active run (and waits for it to end), then removes the thread, its runs and their events, its history, its pending tool calls, and the attachments its messages refer to that no other thread of the user's does — all at once, or nothing.",
    params(("threadId" = String, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`thread not found`", body = Detail),
        (status = 409, description = "`thread belongs to automation job <id>: delete the job first`, `the thread already has an active run; wait for it or cancel it` (a run it cancelled did not end within 30 s)", body = Detail),
    )
)]
pub(super) async fn remove(
    State(service): State<Service>,
    User(user): User,
    Path(thread_id): Path<String>,
) -> ApiResult {
    let deleted = service.engine.delete_thread(&user, &thread_id).await?;
    tracing::info!(
        runs = deleted.runs,
        messages = deleted.messages,
        attachments = deleted.attachments.len(),
        "thread deleted"
    );
    Ok(StatusCode::NO_CONTENT.into_response())
}
