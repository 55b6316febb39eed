//! `GET /api/v1/agent/history`: a thread's messages of one day, in the
//! user's zone (the rules are in [`crate::history`]).

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use serde_json::Value;

use super::error::Detail;
use super::{ApiError, ApiResult, User, now_ms};
use crate::attachments::REFERENCE_PREFIX;
use crate::history::HistoryDay;
use crate::service::Service;

#[utoipa::path(
    get,
    path = "/api/v1/agent/history",
    operation_id = "history",
    summary = "Day-scoped history snapshot",
    params(
        ("threadId" = Option<String>, Query, description = "Default: the user's most recently active thread"),
        ("before" = Option<String>, Query, format = Date, description = "Latest day with messages strictly before this date (profile time zone, UTC if none)"),
    ),
    responses(
        (status = 200, description = "Snapshot", body = HistoryDay),
        (status = 404, description = "`thread not found`", body = Detail),
        (status = 422, description = "`before must be a date (YYYY-MM-DD)`", body = Detail),
    )
)]
pub(super) async fn get_history(
    State(service): State<Service>,
    User(user): User,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult {
    let before = query
        .get("before")
        .map(|b| b.parse::<jiff::civil::Date>())
        .transpose()
        .map_err(|_| ApiError::unprocessable("before must be a date (YYYY-MM-DD)"))?;
    let store = &service.engine.store;
    let thread = match query.get("threadId") {
        Some(thread) => match store.thread_owner(thread).await? {
            Some(owner) if owner == user => Some(thread.clone()),
            _ => return Err(ApiError::not_found("thread not found")),
        },
        None => store.latest_thread(&user).await?,
    };
    let tz = store
        .settings(&user)
        .await?
        .get("timezone")
        .and_then(Value::as_str)
        .and_then(|name| jiff::tz::TimeZone::get(name).ok())
        .unwrap_or(jiff::tz::TimeZone::UTC);
    // One day of the thread, read by index: never the whole thread.
    let day = match &thread {
        Some(thread_id) => {
            let thread = crate::history::StoredThread {
                store: &**store,
                thread_id,
            };
            crate::history::read_day(&thread, &tz, before).await?
        }
        None => (None, false, Vec::new()),
    };
    let presigned = presigned(&service, &user, &day.2).await?;
    let snapshot = crate::history::snapshot(thread.as_deref(), day, &|reference| match presigned
        .get(reference)
    {
        Some(url) => url.clone(),
        None => resign(&service, &headers, &user, reference),
    });
    Ok(axum::Json(snapshot).into_response())
}

/// The bucket's presigned URLs for the references in `messages` to the
/// user's attachments whose bytes are there, by reference (presigning may
/// wait on credentials; the snapshot's signing does not wait).
async fn presigned(
    service: &Service,
    user: &str,
    messages: &[crate::store::StoredMessage],
) -> Result<HashMap<String, String>, crate::Error> {
    let mut urls = HashMap::new();
    let Some(attachments) = service
        .attachments
        .as_ref()
        .filter(|a| a.bucket().is_some())
    else {
        return Ok(urls);
    };
    let now_s = now_ms() / 1000;
    for id in crate::attachments::image_references(messages.iter().map(|m| &m.message)) {
        let Some(record) = service.engine.store.attachment(&id).await? else {
            continue;
        };
        if record.user_id == user && record.in_bucket {
            let (url, _) = attachments.url("", &id, user, true, now_s).await?;
            urls.insert(format!("{REFERENCE_PREFIX}{id}"), url);
        }
    }
    Ok(urls)
}

/// The base URL clients reach us by (for absolute attachment URLs): the
/// configured public URL, else the request's `Host`.
pub(super) fn base_url(service: &Service, headers: &HeaderMap) -> String {
    if let Some(url) = &service.options.public_url {
        return url.clone();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

/// A fresh signed URL for a stored `attachment:{id}` reference.
fn resign(service: &Service, headers: &HeaderMap, user: &str, reference: &str) -> String {
    match (
        reference.strip_prefix(REFERENCE_PREFIX),
        &service.attachments,
    ) {
        (Some(id), Some(attachments)) => {
            attachments
                .sign(&base_url(service, headers), id, user, now_ms() / 1000)
                .0
        }
        _ => reference.to_owned(),
    }
}
