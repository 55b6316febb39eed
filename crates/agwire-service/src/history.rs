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

use crate::error::Error;
use crate::store::StoredMessage;

/// Whether history shows a message: user messages, and assistant messages
/// that say something (one that only called tools is plumbing) — or that
/// carry a UI, which the store marks shown when it is given one. Decided
/// when the message is stored, so that a day is read by an index.
pub(crate) fn shown(message: &Message) -> bool {
    match message {
        Message::User(_) => true,
        Message::Assistant(a) => a.content.as_ref().is_some_and(|c| !c.is_empty()),
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

/// What a snapshot reads of a thread: its shown messages, by when they
/// were stored — one day's worth at a time, never the whole thread (the
/// store answers both from an index).
#[async_trait::async_trait]
pub(crate) trait ShownMessages: Sync {
    /// When the latest shown message stored strictly before `before_ms`
    /// was stored, if one was.
    async fn last_shown_before(&self, before_ms: i64) -> Result<Option<i64>, Error>;

    /// The shown messages stored in `[from_ms, to_ms)`, in thread order.
    async fn shown_between(&self, from_ms: i64, to_ms: i64) -> Result<Vec<StoredMessage>, Error>;
}

/// A thread of a store, as [`ShownMessages`].
pub(crate) struct StoredThread<'a> {
    pub(crate) store: &'a dyn crate::store::Store,
    pub(crate) thread_id: &'a str,
}

#[async_trait::async_trait]
impl ShownMessages for StoredThread<'_> {
    async fn last_shown_before(&self, before_ms: i64) -> Result<Option<i64>, Error> {
        self.store
            .last_shown_before(self.thread_id, before_ms)
            .await
    }

    async fn shown_between(&self, from_ms: i64, to_ms: i64) -> Result<Vec<StoredMessage>, Error> {
        self.store
            .shown_messages(self.thread_id, from_ms, to_ms)
            .await
    }
}

/// When `day` starts in `tz` (ms since the epoch): `None` past the last
/// instant a timestamp can hold, `Some(i64::MIN)` before the first.
fn start_of(day: Date, tz: &TimeZone) -> Option<i64> {
    match day.to_zoned(tz.clone()) {
        Ok(start) => Some(start.timestamp().as_millisecond()),
        Err(_) if day.year() > 0 => None,
        Err(_) => Some(i64::MIN),
    }
}

/// The day a snapshot shows, read from `thread`: the latest day in `tz`
/// strictly before `before` with a shown message, its shown messages, and
/// whether an earlier day has any. Three indexed reads, whatever the
/// thread's length.
pub(crate) async fn read_day(
    thread: &dyn ShownMessages,
    tz: &TimeZone,
    before: Option<Date>,
) -> Result<(Option<Date>, bool, Vec<StoredMessage>), Error> {
    let bound = before.and_then(|b| start_of(b, tz)).unwrap_or(i64::MAX);
    let Some(last) = thread.last_shown_before(bound).await? else {
        return Ok((None, false, Vec::new()));
    };
    let Ok(at) = jiff::Timestamp::from_millisecond(last) else {
        return Ok((None, false, Vec::new()));
    };
    let day = at.to_zoned(tz.clone()).date();
    let start = start_of(day, tz).unwrap_or(i64::MIN);
    let end = day
        .tomorrow()
        .ok()
        .and_then(|next| start_of(next, tz))
        .unwrap_or(i64::MAX)
        .min(bound);
    let messages = thread.shown_between(start, end).await?;
    let has_more = thread.last_shown_before(start).await?.is_some();
    Ok((Some(day), has_more, messages))
}

/// The snapshot of `thread_id` showing `day` (see [`read_day`]). `sign`
/// turns a stored attachment URL into one the client may fetch now.
pub(crate) fn snapshot(
    thread_id: Option<&str>,
    (day, has_more, messages): (Option<Date>, bool, Vec<StoredMessage>),
    sign: &dyn Fn(&str) -> String,
) -> HistoryDay {
    HistoryDay {
        scope: Scope::HistoryDay,
        thread_id: thread_id.map(str::to_owned),
        day: day.map(|d| d.to_string()),
        has_more,
        messages: messages.iter().map(|m| render(m, sign)).collect(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A thread held in memory, read as the store reads one.
    struct Thread(Vec<StoredMessage>);

    #[async_trait::async_trait]
    impl ShownMessages for Thread {
        async fn last_shown_before(&self, before_ms: i64) -> Result<Option<i64>, Error> {
            Ok(self
                .0
                .iter()
                .filter(|m| is_shown(m) && m.created_at < before_ms)
                .map(|m| m.created_at)
                .max())
        }

        async fn shown_between(&self, from: i64, to: i64) -> Result<Vec<StoredMessage>, Error> {
            Ok(self
                .0
                .iter()
                .filter(|m| is_shown(m) && (from..to).contains(&m.created_at))
                .cloned()
                .collect())
        }
    }

    /// As the store marks it: by its message, or by the UI it was given.
    fn is_shown(stored: &StoredMessage) -> bool {
        shown(&stored.message) || stored.ui_schema.is_some()
    }

    /// A snapshot as the API sends it.
    fn snapshot(
        thread_id: Option<&str>,
        messages: &[StoredMessage],
        tz: &TimeZone,
        before: Option<Date>,
        sign: &dyn Fn(&str) -> String,
    ) -> Value {
        let thread = Thread(messages.to_vec());
        let day = futures_util::FutureExt::now_or_never(read_day(&thread, tz, before))
            .unwrap()
            .unwrap();
        serde_json::to_value(super::snapshot(thread_id, day, sign)).unwrap()
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
        // The calendar's ends, in zones either side of UTC: no overflow.
        let tokyo = TimeZone::get("Asia/Tokyo").unwrap();
        for tz in [&utc, &la, &tokyo] {
            assert_eq!(days(tz, Some("9999-12-31")).0, days(tz, None).0);
            assert_eq!(
                days(tz, Some("-009999-01-01")),
                (json!(null), json!(false), vec![])
            );
        }
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
