//! The official 1.1 conformance streams that exercise the apply stage alone:
//! every fixture that must complete, carries no chunk events and pins no
//! client version. Each stream is decoded event by event, folded into a
//! [`Session`] started from the fixture's input, and checked against the
//! fixture's `messages`, `state` and `messageCount` expectations (and its
//! `noWarnings` / apply-stage `warnings`).
//!
//! The corpus lives outside the crate: `AGUI_SPEC_DIR`, or
//! `../../../shared/agui-spec` from this crate. Without it the test says so
//! and passes.

use crate::common;

use std::path::PathBuf;

use agwire_core::apply::Session;
use agwire_core::{Event, Message};
use serde_json::Value;

/// The fixture's subset rule: objects compare the listed keys only, arrays
/// compare pairwise at exactly the same length, an empty object or array
/// matches anything.
fn subset_mismatch(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Object(want), _) if want.is_empty() => None,
        (Value::Array(want), _) if want.is_empty() => None,
        (Value::Object(want), Value::Object(have)) => want.iter().find_map(|(key, value)| {
            let at = format!("{path}.{key}");
            match have.get(key) {
                Some(found) => subset_mismatch(value, found, &at),
                None => Some(format!("{at}: missing")),
            }
        }),
        (Value::Array(want), Value::Array(have)) => {
            if want.len() != have.len() {
                return Some(format!("{path}: length {} != {}", have.len(), want.len()));
            }
            want.iter()
                .zip(have)
                .enumerate()
                .find_map(|(i, (w, h))| subset_mismatch(w, h, &format!("{path}[{i}]")))
        }
        (Value::Number(want), Value::Number(have)) if want.as_f64() == have.as_f64() => None,
        _ if expected == actual => None,
        _ => Some(format!("{path}: {actual} != {expected}")),
    }
}

/// Fixtures whose expected warnings come from stages other than decoding and
/// apply (version negotiation, enforcement of unknown event types); their
/// messages and state are still checked.
const WARNINGS_FROM_OTHER_STAGES: &[&str] = &[
    "producer-declares-newer-version-warns",
    "producer-declares-uninterpretable-version-warns",
    "unknown-event-dropped",
];

fn run_fixture(fixture: &Value) -> Result<(), String> {
    let input = fixture.get("input");
    let messages: Vec<Message> = match input.and_then(|i| i.get("messages")) {
        Some(messages) => serde_json::from_value(messages.clone()).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    let state = input
        .and_then(|i| i.get("state"))
        .filter(|s| !s.is_null())
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    let mut session = Session::new(messages, state);
    let mut warnings = Vec::new();
    for raw in fixture["stream"].as_array().ok_or("no stream")? {
        let decoded = Event::from_json(&raw.to_string()).map_err(|e| format!("{raw}: {e}"))?;
        warnings.extend(decoded.warnings.iter().map(ToString::to_string));
        let applied = session.apply(&decoded.value);
        warnings.extend(applied.warnings.iter().map(ToString::to_string));
    }

    let expect = &fixture["expect"];
    let messages = serde_json::to_value(&session.messages).map_err(|e| e.to_string())?;
    if let Some(count) = expect.get("messageCount").and_then(Value::as_u64)
        && session.messages.len() as u64 != count
    {
        return Err(format!(
            "messageCount {} != {count}: {messages}",
            session.messages.len()
        ));
    }
    if let Some(want) = expect.get("messages")
        && let Some(why) = subset_mismatch(want, &messages, "messages")
    {
        return Err(format!("{why}\n  got {messages}"));
    }
    if let Some(want) = expect.get("state")
        && let Some(why) = subset_mismatch(want, &session.state, "state")
    {
        return Err(format!("{why}\n  got {}", session.state));
    }
    if expect.get("noWarnings") == Some(&Value::Bool(true)) && !warnings.is_empty() {
        return Err(format!("expected no warnings, got {warnings:?}"));
    }
    let name = fixture["name"].as_str().unwrap_or_default();
    let expected_warnings = expect.get("warnings").and_then(Value::as_array);
    for want in expected_warnings
        .into_iter()
        .flatten()
        .filter(|_| !WARNINGS_FROM_OTHER_STAGES.contains(&name))
    {
        let want = want.as_str().unwrap_or_default();
        if !warnings.iter().any(|w| w.contains(want)) {
            return Err(format!(
                "expected a warning containing {want:?}, got {warnings:?}"
            ));
        }
    }
    Ok(())
}

#[test]
fn apply_stage_conformance_streams() {
    let Some(spec) = common::spec_dir() else {
        return;
    };
    let dir = spec.join("1.1/conformance/streams");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();

    let mut ran = Vec::new();
    let mut failures = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let Ok(fixture) = serde_json::from_str::<Value>(&text) else {
            failures.push(format!("{}: not JSON", path.display()));
            continue;
        };
        let completes = fixture["expect"]["outcome"] == "completed";
        let has_chunks = fixture["stream"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["type"].as_str().is_some_and(|t| t.ends_with("_CHUNK")));
        if !completes || has_chunks || fixture.get("client").is_some() {
            continue;
        }
        let name = fixture["name"].as_str().unwrap_or_default().to_owned();
        if let Err(why) = run_fixture(&fixture) {
            failures.push(format!("{name}: {why}"));
        }
        ran.push(name);
    }

    // The fixtures the brief names must all be among those run.
    for required in [
        "state-delta-applies",
        "state-delta-unappliable-warns-and-keeps",
        "state-falsy-snapshot-applies",
        "state-null-snapshot-applies",
        "state-snapshot-replaces",
        "messages-snapshot-reconciles-by-id",
        "metadata-merges-last-write-wins",
        "activity-delta-missing-target-tolerated",
        "activity-replace-false-preserves",
        "activity-snapshot-then-delta",
        "tool-call-metadata-lands-on-the-call",
        "tool-call-triad-assembles",
        "tool-result-parts-mint-tool-message",
        "tool-result-file-source-passes-through",
        "reasoning-span-and-message",
        "reopen-closed-message-appends",
        "two-sequential-runs-accumulate",
        "open-metadata-preserved",
        "encrypted-value-unknown-entity-tolerated",
    ] {
        assert!(ran.iter().any(|n| n == required), "{required} was not run");
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        ran.len(),
        failures.join("\n")
    );
    eprintln!("{} apply-stage conformance streams passed", ran.len());
}
