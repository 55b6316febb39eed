//! `/api/v1/agent/runs` (seed 004): accept a run (202, or its stream when
//! asked), read it, stream or resume its events, cancel it.

use std::collections::HashMap;

use agwire_codec::negotiate::{Negotiator, WireFormat};
use agwire_core::RunAgentInput;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::stream::stream;
use super::{ApiError, ApiResult, BACKEND_TOOLS, User, now_ms};
use crate::attachments::{Attachments, REFERENCE_PREFIX};
use crate::config::BusyThread;
use crate::runs::RunRequest;
use crate::service::Service;
use crate::store::{Admission, RunRecord};
use crate::validate::{MAX_PAYLOAD_BYTES, Rules, validate_run};

/// What a path segment must escape: everything but RFC 3986's unreserved
/// characters and the sub-delimiters a segment may hold as they are.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

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

pub(super) async fn post_run(
    State(service): State<Service>,
    User(user): User,
    request: Request,
) -> ApiResult {
    let headers = request.headers().clone();
    super::limits::require_json(&headers)?;
    // One byte over the limit is enough to know.
    let body = super::limits::read_body(
        request.into_body(),
        MAX_PAYLOAD_BYTES + 1,
        "RunAgentInput payload exceeds size limit",
    )
    .await?;
    // (Scoped: `Rules` holds a `&dyn Fn`, which must not live across an await.)
    let now_s = now_ms() / 1000;
    let validated = {
        let attachments = service.attachments.as_ref();
        let signed =
            |url: &str| attachments.is_some_and(|a| a.verify_url(url, &user, now_s).is_some());
        let rules = Rules {
            backend_tools: BACKEND_TOOLS,
            signed_url: &signed,
        };
        validate_run(&body, &rules)
    };
    let mut run = validated.map_err(|rejection| {
        let status =
            StatusCode::from_u16(rejection.status).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
        ApiError::new(status, rejection.detail)
    })?;
    // Store references, not URLs: a URL expires, the attachment does not.
    if let Some(attachments) = &service.attachments {
        to_references(&mut run.input, attachments, &user, now_s);
    }
    let request = RunRequest {
        user,
        input: run.input,
        mode: Some(run.runtime_mode),
        client_time: run.client_time,
        admission: Admission {
            enqueue: service.options.busy_thread == BusyThread::Enqueue,
            whole_history: false,
        },
    };
    let accepted = service.engine.accept(request).await?;
    if let Some(format) = asked_stream(&headers) {
        return Ok(stream(&service, accepted.task_id, 0, format));
    }
    let location = format!(
        "/api/v1/agent/runs/{}/events",
        percent_encoding::utf8_percent_encode(&accepted.run_id, PATH_SEGMENT)
    );
    let mut response = (
        StatusCode::ACCEPTED,
        axum::Json(json!({
            "taskId": accepted.task_id,
            "threadId": accepted.thread_id,
            "runId": accepted.run_id,
            "created": accepted.created,
        })),
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
        .store
        .run(user, run_id)
        .await?
        .ok_or_else(|| ApiError::not_found("run not found"))
}

pub(super) async fn get_run(
    State(service): State<Service>,
    User(user): User,
    Path(run_id): Path<String>,
) -> ApiResult {
    let run = owned_run(&service, &user, &run_id).await?;
    let stored = |text: Option<&str>| text.and_then(|t| serde_json::from_str::<Value>(t).ok());
    Ok(axum::Json(json!({
        "taskId": run.task_id,
        "threadId": run.thread_id,
        "runId": run.run_id,
        "status": run.status,
        "createdAt": run.created_at,
        "startedAt": run.started_at,
        "finishedAt": run.finished_at,
        "error": stored(run.error.as_deref()),
        "usage": stored(run.usage.as_deref()),
    }))
    .into_response())
}

pub(super) async fn get_events(
    State(service): State<Service>,
    User(user): User,
    Path(run_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult {
    let run = owned_run(&service, &user, &run_id).await?;
    let resume = match headers.get("last-event-id").map(|v| v.to_str()) {
        Some(Ok(id)) => Some(id.to_owned()),
        // Bytes that are not text are not a sequence number either.
        Some(Err(_)) => Some(String::from("\u{fffd}")),
        None => query.get("after").cloned(),
    };
    let after = match resume.as_deref().map(str::parse::<u64>) {
        None => 0,
        Some(Ok(after)) => after,
        Some(Err(_)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "Last-Event-ID / after must be an event sequence number",
            ));
        }
    };
    let format = Negotiator::new()
        .prefer_sse_for_wildcards(true)
        .choose(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    Ok(stream(&service, run.task_id, after, format))
}

pub(super) async fn cancel_run(
    State(service): State<Service>,
    User(user): User,
    Path(run_id): Path<String>,
) -> ApiResult {
    let run = owned_run(&service, &user, &run_id).await?;
    service.engine.cancel(&run).await?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({"runId": run.run_id, "cancelRequested": true})),
    )
        .into_response())
}

/// Replaces the user message's signed attachment URLs by references.
fn to_references(input: &mut RunAgentInput, attachments: &Attachments, user: &str, now_s: i64) {
    use agwire_core::{Content, ContentPart, Message, PartSource};
    for message in &mut input.messages {
        let Message::User(message) = message else {
            continue;
        };
        let Content::Parts(parts) = &mut message.content else {
            continue;
        };
        for part in parts.iter_mut() {
            if let ContentPart::Image(media) = part
                && let PartSource::Url { value, .. } = &mut media.source
                && let Some(id) = attachments.verify_url(value, user, now_s)
            {
                *value = format!("{REFERENCE_PREFIX}{id}");
            }
        }
    }
}
