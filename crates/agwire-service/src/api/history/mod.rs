//! `GET /api/v1/agent/history`: a thread's messages of one day, in the
//! user's zone (the rules are in [`crate::history`]).

use std::collections::HashMap;

use agwire_core::{Content, ContentPart, Message, PartSource};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::error::Detail;
use super::{ApiError, ApiResult, User, now_ms};
use crate::attachments::REFERENCE_PREFIX;
use crate::history::{ShownDay, StoredMessage};
use crate::service::Service;

#[cfg(test)]
mod tests;

/// A day of a thread, as the history API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = HistorySnapshotResponse)]
pub(super) struct HistoryDay {
    scope: Scope,
    thread_id: Option<String>,
    /// The day shown (in the user's zone), or none when nothing is.
    #[schema(format = Date)]
    day: Option<String>,
    /// Whether earlier days have messages (ask with `before` = `day`).
    has_more: bool,
    messages: Vec<HistoryMessage>,
}

/// What a snapshot covers (always one day).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum Scope {
    HistoryDay,
}

/// A message of a history day.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "role", rename_all = "lowercase")]
enum HistoryMessage {
    User(UserEntry),
    Assistant(AssistantEntry),
}

/// What the user said, with their images.
#[derive(Debug, Serialize, ToSchema)]
struct UserEntry {
    id: String,
    seq: i64,
    content: String,
    attachments: Vec<AttachmentLink>,
    #[schema(format = DateTime)]
    timestamp: String,
}

/// An image of a user message, with a fresh signed URL.
#[derive(Debug, Serialize, ToSchema)]
struct AttachmentLink {
    #[serde(rename = "mimeType")]
    mime_type: String,
    url: String,
}

/// What the assistant answered.
#[derive(Debug, Serialize, ToSchema)]
struct AssistantEntry {
    id: String,
    seq: i64,
    content: String,
    /// UiSchemaRenderer 2.0 (docs/ui-schema.md).
    #[schema(value_type = Option<Object>)]
    ui_schema: Option<Value>,
    #[schema(format = DateTime)]
    timestamp: String,
}

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
    let (thread, day) = service
        .engine
        .history_day(&user, query.get("threadId").map(String::as_str), before)
        .await?;
    let presigned = presigned(&service, &user, &day.messages).await?;
    let snapshot = snapshot(
        thread.as_deref(),
        &day,
        &|reference| match presigned.get(reference) {
            Some(url) => url.clone(),
            None => resign(&service, &headers, &user, reference),
        },
    );
    Ok(axum::Json(snapshot).into_response())
}

/// The bucket's presigned URLs for the references in `messages` to the
/// user's attachments whose bytes are there, by reference (presigning may
/// wait on credentials; the snapshot's signing does not wait).
async fn presigned(
    service: &Service,
    user: &str,
    messages: &[StoredMessage],
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
        let Some(record) = service.engine.users_attachment(user, &id).await? else {
            continue;
        };
        if record.in_bucket {
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

/// The snapshot of `thread_id` showing `day` (see
/// [`crate::history::read_day`]). `sign` turns a stored attachment URL into
/// one the client may fetch now.
fn snapshot(thread_id: Option<&str>, day: &ShownDay, sign: &dyn Fn(&str) -> String) -> HistoryDay {
    HistoryDay {
        scope: Scope::HistoryDay,
        thread_id: thread_id.map(str::to_owned),
        day: day.day.map(|d| d.to_string()),
        has_more: day.has_more,
        messages: day.messages.iter().map(|m| render(m, sign)).collect(),
    }
}

fn render(stored: &StoredMessage, sign: &dyn Fn(&str) -> String) -> HistoryMessage {
    let timestamp = jiff::Timestamp::from_millisecond(stored.created_at)
        .map(|t| t.to_string())
        .unwrap_or_default();
    match &stored.message {
        Message::User(user) => {
            let (content, attachments) = match &user.content {
                Content::Text(text) => (text.clone(), Vec::new()),
                Content::Parts(parts) => {
                    let text = parts
                        .iter()
                        .filter_map(|p| match p {
                            ContentPart::Text(t) => Some(t.text.as_str()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                    let attachments = parts
                        .iter()
                        .filter_map(|p| match p {
                            ContentPart::Image(media) => match &media.source {
                                PartSource::Url { value, mime_type } => Some(AttachmentLink {
                                    mime_type: mime_type.as_deref().unwrap_or("image/*").to_owned(),
                                    url: sign(value),
                                }),
                                _ => None,
                            },
                            _ => None,
                        })
                        .collect();
                    (text, attachments)
                }
            };
            HistoryMessage::User(UserEntry {
                id: user.id.clone(),
                seq: stored.seq,
                content,
                attachments,
                timestamp,
            })
        }
        other => {
            let content = match other {
                Message::Assistant(a) => a.content.clone().unwrap_or_default(),
                _ => String::new(),
            };
            HistoryMessage::Assistant(AssistantEntry {
                id: other.id().to_owned(),
                seq: stored.seq,
                content,
                ui_schema: stored.ui_schema.clone(),
                timestamp,
            })
        }
    }
}
