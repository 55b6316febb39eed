// Backend tools against a real SQLite store: schema-checked arguments,
// `event_timezone` required and never defaulted, local times converted in
// the named zone, per-user calendars.
use super::{BackendTools, NAMES, ToolEnv};
use crate::clock::RunClock;
use crate::store::SqliteStore;
use serde_json::{Value, json};

async fn store() -> SqliteStore {
    let dir = std::env::temp_dir().join(format!("agwire-tools-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    SqliteStore::open(&dir.join("agwire.db")).await.unwrap()
}

fn clock() -> RunClock {
    // Device in Los Angeles at 2026-03-16T09:12:33-07:00 (the agent-run API's documented example).
    let device = crate::run::ClientTime {
        device_timezone: jiff::tz::TimeZone::get("America/Los_Angeles").unwrap(),
        device_timezone_name: "America/Los_Angeles".into(),
        now: "2026-03-16T16:12:33Z".parse().unwrap(),
        epoch_ms: 1_773_677_553_000,
    };
    RunClock::resolve(Some(&device), Some("Asia/Tokyo"), jiff::Timestamp::now())
}

async fn call(
    tools: &BackendTools,
    store: &SqliteStore,
    user: &str,
    name: &str,
    args: Value,
) -> (Value, bool, Option<Value>) {
    let clock = clock();
    let env = ToolEnv {
        store,
        user,
        clock: &clock,
        now_ms: 0,
    };
    let out = tools.call(name, &args.to_string(), env).await;
    (
        serde_json::from_str(&out.content).unwrap(),
        out.is_error,
        out.ui_hint,
    )
}

#[tokio::test]
async fn every_tool_has_a_compiled_schema() {
    let tools = BackendTools::new();
    for name in NAMES {
        assert!(tools.has(name), "{name}");
    }
    let all: Vec<String> = NAMES.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(tools.specs(&all).len(), NAMES.len());
    assert_eq!(
        tools.specs(&["calendar_read".into(), "nope".into()]).len(),
        1
    );
}

#[tokio::test]
async fn calendar_write_needs_its_zone_and_converts_local_times_in_it() {
    let (tools, store) = (BackendTools::new(), store().await);
    // No event_timezone: an error that asks for it, nothing stored.
    let (answer, error, _) = call(
        &tools,
        &store,
        "alice",
        "calendar_write",
        json!({"title": "Standup", "start": "2026-03-17T09:00"}),
    )
    .await;
    assert!(error);
    let message = answer["error"].as_str().unwrap();
    assert!(
        message.contains("event_timezone is required") && message.contains("America/Los_Angeles"),
        "{message}"
    );
    let (listed, _, _) = call(
        &tools,
        &store,
        "alice",
        "calendar_read",
        json!({"from": "2026-03-01T00:00", "to": "2026-04-01T00:00"}),
    )
    .await;
    assert_eq!(listed["events"], json!([]));

    // "Tomorrow at 9" in Los Angeles is 16:00 UTC.
    let (answer, error, hint) = call(&tools, &store, "alice", "calendar_write",
        json!({"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "America/Los_Angeles"})).await;
    assert!(!error, "{answer}");
    let event = &answer["event"];
    assert_eq!(event["start_utc"], "2026-03-17T16:00:00Z");
    assert_eq!(event["end_utc"], "2026-03-17T17:00:00Z");
    assert_eq!(event["start"], "2026-03-17T09:00:00-07:00");
    let hint = hint.unwrap();
    assert_eq!(hint["status"], "success");
    assert_eq!(hint["badge"], "CREATED");

    // Read back in Tokyo: the same instant, shown in the asked zone.
    let (listed, _, _) = call(
        &tools,
        &store,
        "alice",
        "calendar_read",
        json!({"from": "2026-03-18T00:00", "to": "2026-03-19T00:00", "timezone": "Asia/Tokyo"}),
    )
    .await;
    assert_eq!(listed["events"][0]["start"], "2026-03-18T01:00:00+09:00");
    // Bob has no such event, and cannot update or delete Alice's.
    let id = event["id"].as_str().unwrap();
    let (bobs, _, _) = call(
        &tools,
        &store,
        "bob",
        "calendar_read",
        json!({"from": "2026-03-01T00:00", "to": "2026-04-01T00:00"}),
    )
    .await;
    assert_eq!(bobs["events"], json!([]));
    let (_, error, _) = call(&tools, &store, "bob", "calendar_write",
        json!({"id": id, "title": "Mine now", "start": "2026-03-17T10:00", "event_timezone": "UTC"})).await;
    assert!(error);
    let (_, error, _) = call(&tools, &store, "bob", "calendar_delete", json!({"id": id})).await;
    assert!(error);

    // Update with a duration, then delete.
    let (answer, error, hint) = call(&tools, &store, "alice", "calendar_write",
        json!({"id": id, "title": "Standup (moved)", "start": "2026-03-17T10:30", "duration_minutes": 15, "event_timezone": "America/Los_Angeles"})).await;
    assert!(!error, "{answer}");
    assert_eq!(answer["event"]["end_utc"], "2026-03-17T17:45:00Z");
    assert_eq!(hint.unwrap()["badge"], "UPDATED");
    let (_, error, _) = call(
        &tools,
        &store,
        "alice",
        "calendar_delete",
        json!({"id": id}),
    )
    .await;
    assert!(!error);
    let (_, error, _) = call(
        &tools,
        &store,
        "alice",
        "calendar_delete",
        json!({"id": id}),
    )
    .await;
    assert!(error);
}

#[tokio::test]
async fn invalid_arguments_are_answered_with_what_is_wrong() {
    let (tools, store) = (BackendTools::new(), store().await);
    for (args, needle) in [
        (
            json!({"title": "", "start": "2026-03-17T09:00", "event_timezone": "UTC"}),
            "/title",
        ),
        (
            json!({"title": "x", "start": "2026-03-17T09:00", "event_timezone": "Mars/Base"}),
            "not an IANA time zone",
        ),
        (
            json!({"title": "x", "start": "soon", "event_timezone": "UTC"}),
            "YYYY-MM-DDTHH:MM",
        ),
        (
            json!({"title": "x", "start": "2026-03-17T09:00", "end": "2026-03-17T08:00", "event_timezone": "UTC"}),
            "end must be after start",
        ),
        (
            json!({"title": "x", "start": "2026-03-17T09:00", "event_timezone": "UTC", "colour": "red"}),
            "colour",
        ),
        (
            json!({"title": "x", "start": "2026-03-08T02:30", "event_timezone": "America/Los_Angeles"}),
            "daylight-saving",
        ),
    ] {
        let (answer, error, _) =
            call(&tools, &store, "alice", "calendar_write", args.clone()).await;
        assert!(error, "{args}");
        let message = answer["error"].as_str().unwrap();
        assert!(message.contains(needle), "{args}: {message}");
    }
    let clock = clock();
    let env = ToolEnv {
        store: &store,
        user: "alice",
        clock: &clock,
        now_ms: 0,
    };
    let out = tools.call("calendar_write", "{not json", env).await;
    assert!(out.is_error && out.content.contains("not JSON"));
    let out = tools.call("launch_rockets", "{}", env).await;
    assert!(out.is_error && out.content.contains("no backend tool"));
}

#[tokio::test]
async fn current_time_is_the_devices_not_the_servers() {
    let (tools, store) = (BackendTools::new(), store().await);
    let (answer, error, _) = call(&tools, &store, "alice", "get_current_time", json!({})).await;
    assert!(!error);
    assert_eq!(answer["now"], "2026-03-16T09:12:33-07:00");
    assert_eq!(answer["timezone"], "America/Los_Angeles");
    let (answer, _, _) = call(
        &tools,
        &store,
        "alice",
        "get_current_time",
        json!({"timezone": "Asia/Tokyo"}),
    )
    .await;
    assert_eq!(answer["now"], "2026-03-17T01:12:33+09:00");
    let (answer, error, hint) =
        call(&tools, &store, "alice", "render_ui", json!({"title": "Hi"})).await;
    assert!(!error);
    assert_eq!(answer, json!({"rendered": true}));
    assert_eq!(hint, Some(json!({"title": "Hi"})));
}
