//! The history snapshot, read from a thread held in memory and rendered as
//! the API sends it.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde_json::{Value, json};

use crate::error::Error;
use crate::history::{ShownMessages, StoredMessage, read_day};
use crate::store::shown;

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
    serde_json::to_value(super::snapshot(thread_id, &day, sign)).unwrap()
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
