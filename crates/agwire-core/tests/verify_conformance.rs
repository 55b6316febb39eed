//! The official 1.1 conformance streams whose verdict is the verifier's: every stream
//! that decodes without chunk expansion, translation or a version ceiling, replayed
//! through the verifier alone. A `failed` stream must be rejected with its
//! `errorContains`; a `completed` one must pass.

use crate::common;

use agwire_core::Event;
use agwire_core::verify::Verifier;
use serde_json::Value;

/// Streams that are purely about verification: each must be among those checked.
const VERIFICATION_STREAMS: &[&str] = &[
    "content-without-start-fatal",
    "event-after-run-finished-fatal",
    "first-event-not-run-started-fatal",
    "late-run-error-after-finished-run-continues",
    "nested-run-started-fatal",
    "open-message-at-run-finished-fatal",
    "reasoning-discipline-verified",
    "reasoning-span-and-message",
    "reopen-closed-message-appends",
    "run-error-first-run-continues",
    "run-error-then-new-run-continues",
    "run-finished-with-active-subagent-fatal",
    "step-finished-without-start-fatal",
    "subagent-attribution-mismatch-fatal",
    "subagent-finished-unstarted-fatal",
    "subagent-unannounced-attribution-accepted",
    "two-sequential-runs-accumulate",
];

/// Why a stream is not the verifier's to judge, if it is not.
fn out_of_scope(fixture: &Value, events: &[Value]) -> Option<String> {
    if fixture.get("client").is_some() {
        return Some("needs a version ceiling".into());
    }
    for value in events {
        let name = value.get("type").and_then(Value::as_str).unwrap_or("");
        if name.ends_with("_CHUNK") || name.starts_with("THINKING_") {
            return Some(format!("carries {name}, which earlier stages rewrite"));
        }
        if let Err(e) = Event::from_value(value.clone()) {
            return Some(format!("does not decode: {e}"));
        }
    }
    None
}

/// The expectation for the TypeScript lane: the base, with its override applied.
fn expectation<'a>(fixture: &'a Value, key: &str) -> Option<&'a Value> {
    fixture
        .pointer(&format!("/expectOverrides/typescript/{key}"))
        .or_else(|| fixture.pointer(&format!("/expect/{key}")))
}

fn replay(mut verifier: Verifier, events: &[Value]) -> Result<(), String> {
    for (i, value) in events.iter().enumerate() {
        let event = Event::from_value(value.clone())
            .map_err(|e| e.to_string())?
            .value;
        verifier
            .verify(&event)
            .map_err(|e| format!("event {i}: {e}"))?;
    }
    Ok(())
}

#[test]
fn verification_streams_reach_the_expected_verdict() {
    let Some(dir) = common::spec_dir() else {
        return;
    };
    let streams = dir.join("1.1/conformance/streams");
    let mut paths: Vec<_> = std::fs::read_dir(&streams)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 60, "only {} streams found", paths.len());

    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for path in &paths {
        let fixture = common::read_json(path);
        let name = fixture["name"].as_str().unwrap().to_owned();
        let events = fixture["stream"].as_array().unwrap();
        if let Some(reason) = out_of_scope(&fixture, events) {
            assert!(
                !VERIFICATION_STREAMS.contains(&name.as_str()),
                "{name} was expected to be checked but {reason}"
            );
            continue;
        }
        let outcome = expectation(&fixture, "outcome").and_then(Value::as_str);
        let contains = expectation(&fixture, "errorContains")
            .and_then(Value::as_str)
            .unwrap_or("");
        // The consumer pipeline seeds the verifier with the stream's thread.
        let thread = events
            .iter()
            .find_map(|e| e.get("threadId").and_then(Value::as_str))
            .unwrap_or("conformance-thread");
        for (mode, verifier) in [
            ("new", Verifier::new()),
            ("for_thread", Verifier::for_thread(thread)),
        ] {
            match (outcome, replay(verifier, events)) {
                (Some("completed"), Ok(())) => {}
                (Some("failed"), Err(message)) if message.contains(contains) => {}
                (expected, got) => failures.push(format!(
                    "{name} ({mode}): expected {expected:?} containing {contains:?}, got {got:?}"
                )),
            }
        }
        checked.push(name);
    }
    for name in VERIFICATION_STREAMS {
        assert!(checked.iter().any(|c| c == name), "{name} was not checked");
    }
    eprintln!(
        "verifier conformance: {} of {} streams are the verifier's to judge",
        checked.len(),
        paths.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
