//! Day-scoped history snapshots (the agent-run API's `HistorySnapshotResponse`).
//!
//! A day is a calendar day in the user's time zone. The snapshot shows the
//! latest day strictly before `before` (or the latest day at all) that has
//! user or assistant messages, those messages in thread order, and whether
//! earlier days have any. Tool messages are stored for the runtime and never
//! shown.

use agwire_core::{Content, ContentPart, Message, PartSource};
use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::store::StoredMessage;

/// The calendar day of a stored message in `tz`.
fn day_of(message: &StoredMessage, tz: &TimeZone) -> Option<Date> {
    let at = jiff::Timestamp::from_millisecond(message.created_at).ok()?;
    Some(at.to_zoned(tz.clone()).date())
}

/// Whether a message is shown in history (user messages, and assistant
/// messages with text).
/// User messages, and assistant messages that say something or carry a UI
/// (one that only called tools is plumbing).
fn shown(stored: &StoredMessage) -> bool {
    match &stored.message {
        Message::User(_) => true,
        Message::Assistant(a) => {
            a.content.as_ref().is_some_and(|c| !c.is_empty()) || stored.ui_schema.is_some()
        }
        _ => false,
    }
}

/// A day of a thread, as the history API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = HistorySnapshotResponse)]
pub(crate) struct HistoryDay {
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

/// The snapshot of `thread_id` for the day before `before` (or the latest).
/// `sign` turns a stored attachment URL into one the client may fetch now.
pub(crate) fn snapshot(
    thread_id: Option<&str>,
    messages: &[StoredMessage],
    tz: &TimeZone,
    before: Option<Date>,
    sign: &dyn Fn(&str) -> String,
) -> HistoryDay {
    let mut snapshot = HistoryDay {
        scope: Scope::HistoryDay,
        thread_id: thread_id.map(str::to_owned),
        day: None,
        has_more: false,
        messages: Vec::new(),
    };
    let visible: Vec<(&StoredMessage, Date)> = messages
        .iter()
        .filter(|m| shown(m))
        .filter_map(|m| day_of(m, tz).map(|d| (m, d)))
        .collect();
    let Some(day) = visible
        .iter()
        .map(|(_, d)| *d)
        .filter(|d| before.is_none_or(|b| *d < b))
        .max()
    else {
        return snapshot;
    };
    snapshot.day = Some(day.to_string());
    snapshot.has_more = visible.iter().any(|(_, d)| *d < day);
    snapshot.messages = visible
        .iter()
        .filter(|(_, d)| *d == day)
        .map(|(m, _)| render(m, sign))
        .collect();
    snapshot
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A snapshot as the API sends it.
    fn snapshot(
        thread_id: Option<&str>,
        messages: &[StoredMessage],
        tz: &TimeZone,
        before: Option<Date>,
        sign: &dyn Fn(&str) -> String,
    ) -> Value {
        serde_json::to_value(super::snapshot(thread_id, messages, tz, before, sign)).unwrap()
    }

    fn at(iso: &str) -> i64 {
        iso.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    fn message(seq: i64, role: &str, text: &str, iso: &str) -> StoredMessage {
        StoredMessage {
            seq,
            message: serde_json::from_value(
                json!({"id": format!("m{seq}"), "role": role, "content": text, "toolCallId": "c"}),
            )
            .unwrap(),
            created_at: at(iso),
            ui_schema: None,
        }
    }

    /// Three turns: late evening in Los Angeles is already tomorrow in UTC.
    fn thread() -> Vec<StoredMessage> {
        vec![
            message(1, "user", "day one", "2026-03-14T18:00:00Z"),
            message(2, "assistant", "reply one", "2026-03-14T18:00:05Z"),
            message(3, "user", "late night", "2026-03-16T06:30:00Z"), // 23:30 on the 15th in LA
            message(4, "tool", "{}", "2026-03-16T06:30:02Z"),
            message(5, "assistant", "reply two", "2026-03-16T06:30:05Z"),
            message(6, "user", "morning", "2026-03-16T17:00:00Z"),
            message(7, "assistant", "reply three", "2026-03-16T17:00:05Z"),
        ]
    }

    fn days(tz: &TimeZone, before: Option<&str>) -> (Value, Value, Vec<i64>) {
        let snap = snapshot(
            Some("t"),
            &thread(),
            tz,
            before.map(|b| b.parse().unwrap()),
            &|u| u.to_owned(),
        );
        let seqs = snap["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["seq"].as_i64().unwrap())
            .collect();
        (snap["day"].clone(), snap["hasMore"].clone(), seqs)
    }

    #[test]
    fn days_follow_the_users_time_zone_and_page_backwards() {
        let utc = TimeZone::UTC;
        let la = TimeZone::get("America/Los_Angeles").unwrap();
        assert_eq!(
            days(&utc, None),
            (json!("2026-03-16"), json!(true), vec![3, 5, 6, 7])
        );
        assert_eq!(
            days(&utc, Some("2026-03-16")),
            (json!("2026-03-14"), json!(false), vec![1, 2])
        );
        assert_eq!(
            days(&la, None),
            (json!("2026-03-16"), json!(true), vec![6, 7])
        );
        assert_eq!(
            days(&la, Some("2026-03-16")),
            (json!("2026-03-15"), json!(true), vec![3, 5])
        );
        assert_eq!(
            days(&la, Some("2026-03-15")),
            (json!("2026-03-14"), json!(false), vec![1, 2])
        );
        assert_eq!(
            days(&la, Some("2026-03-14")),
            (json!(null), json!(false), vec![])
        );
    }

    #[test]
    fn an_answer_shows_when_it_says_something_or_carries_a_ui() {
        let call_only = message(2, "assistant", "", "2026-03-14T10:00:01Z");
        let mut card = message(3, "assistant", "", "2026-03-14T10:00:02Z");
        card.ui_schema = Some(json!({"version": "2.0"}));
        let thread = [
            message(1, "user", "hi", "2026-03-14T10:00:00Z"),
            call_only,
            card,
        ];
        let snap = snapshot(Some("t"), &thread, &TimeZone::UTC, None, &|u| u.to_owned());
        let seqs: Vec<i64> = snap["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["seq"].as_i64().unwrap())
            .collect();
        assert_eq!(seqs, [1, 3]);
        assert_eq!(snap["messages"][1]["ui_schema"], json!({"version": "2.0"}));
    }

    #[test]
    fn tool_messages_never_show_and_user_attachments_are_signed_fresh() {
        let stored = StoredMessage {
            seq: 1,
            message: serde_json::from_value(json!({"id": "u", "role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "url", "value": "att-1", "mimeType": "image/png"}}
            ]}))
            .unwrap(),
            created_at: at("2026-03-14T10:00:00Z"),
            ui_schema: None,
        };
        let snap = snapshot(Some("t"), &[stored], &TimeZone::UTC, None, &|u| {
            format!("https://svc/{u}?sig=x")
        });
        assert_eq!(
            snap["messages"][0],
            json!({"id": "u", "seq": 1, "role": "user", "content": "look",
                   "attachments": [{"mimeType": "image/png", "url": "https://svc/att-1?sig=x"}],
                   "timestamp": "2026-03-14T10:00:00Z"})
        );
        let all = snapshot(Some("t"), &thread(), &TimeZone::UTC, None, &|u| {
            u.to_owned()
        });
        assert!(
            all["messages"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["role"] != "tool")
        );
        assert_eq!(all["messages"][1]["ui_schema"], Value::Null);
    }
}
