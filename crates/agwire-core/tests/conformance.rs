//! The official AG-UI 1.1 conformance streams, run through agwire-core's consumer
//! pipeline (decode → compatibility boundary → enforcement → chunk expansion →
//! verification → apply), each checked against its `expect` block.
//!
//! Relaxations, as `CONFORMANCE-NOTES.md` allows: `warnings` / `noWarnings` are
//! SHOULD-level and reported, not enforced; `expectOverrides.dotnet` is ignored;
//! `expectOverrides.typescript` applies (we expand chunks as that client does);
//! the TypeScript client's Zod error messages are JSON-escaped, so `\"` in
//! `errorContains` is read as `"`. Anything else that fails is listed in
//! `conformance.exceptions.md` with its reason.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;

use agwire_core::decode::{DecodeMode, decode};
use agwire_core::pipeline::Pipeline;
use agwire_core::{Message, RunAgentInput};
use serde_json::{Map, Value, json};

/// Fixtures that may fail without failing the suite, with the reason. Keep in
/// step with `conformance.exceptions.md`.
const EXCEPTIONS: &[(&str, &str)] = &[];

struct Outcome {
    ok: bool,
    error: Option<String>,
    events: Vec<Value>,
    messages: Value,
    state: Value,
    warnings: Vec<String>,
    request: Value,
}

fn run(fixture: &Value, schema: &jsonschema::Validator) -> Outcome {
    let stream = fixture["stream"].as_array().expect("stream");
    let input = fixture.get("input").cloned().unwrap_or(json!({}));
    let thread_id = stream
        .iter()
        .find_map(|e| e.get("threadId").and_then(Value::as_str))
        .unwrap_or("conformance-thread")
        .to_owned();
    let messages: Vec<Message> = match input.get("messages") {
        Some(Value::Array(list)) => list
            .iter()
            .map(|m| {
                decode::<Message>(m.clone(), DecodeMode::Lenient)
                    .expect("input message")
                    .value
            })
            .collect(),
        _ => Vec::new(),
    };
    let state = input.get("state").cloned().unwrap_or(json!({}));
    let ceiling = fixture
        .pointer("/client/maxProtocolVersion")
        .and_then(Value::as_str);
    let mut request = RunAgentInput::prepare(&thread_id, "conformance-run", &messages, &state);
    let mut warnings = Vec::new();
    if let Some(ceiling) = ceiling {
        let (downgraded, w) = request.for_peer_ceiling(ceiling);
        request = downgraded;
        warnings.extend(w.into_iter().map(|w| w.message));
    }
    let mut pipeline = Pipeline::new(thread_id, messages, state);
    if let Some(ceiling) = ceiling {
        pipeline = pipeline.with_peer_ceiling(ceiling);
    }
    let mut events = Vec::new();
    let mut error = None;
    for raw in stream {
        match pipeline.push_value(raw.clone()) {
            Ok(delivered) => {
                for event in delivered {
                    let json = serde_json::to_value(event).unwrap();
                    if let Err(e) = schema.validate(&json) {
                        panic!("delivered a schema-invalid event ({e}): {json}");
                    }
                    events.push(json);
                }
            }
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    warnings.extend(pipeline.take_warnings().into_iter().map(|w| w.message));
    let session = pipeline.session();
    Outcome {
        ok: error.is_none(),
        error,
        events,
        messages: serde_json::to_value(&session.messages).unwrap(),
        state: session.state.clone(),
        warnings,
        request: serde_json::to_value(&request).unwrap(),
    }
}

/// Objects compare on the listed keys; arrays have exactly the listed length and
/// compare pairwise; an empty object or list matches anything.
fn subset(expected: &Value, actual: &Value, at: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(e), _) if e.is_empty() => Ok(()),
        (Value::Array(e), _) if e.is_empty() => Ok(()),
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                let Some(av) = a.get(k) else {
                    return Err(format!("{at}/{k}: missing (expected {v})"));
                };
                subset(v, av, &format!("{at}/{k}"))?;
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "{at}: {} elements, expected {}: {actual}",
                    a.len(),
                    e.len()
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                subset(ev, av, &format!("{at}/{i}"))?;
            }
            Ok(())
        }
        (e, a) if e == a => Ok(()),
        (e, a) => Err(format!("{at}: {a}, expected {e}")),
    }
}

/// Follows `"<index>.<dotted.path>"` into the delivered events.
fn event_path<'v>(events: &'v [Value], path: &str) -> Option<&'v Value> {
    let mut parts = path.split('.');
    let index: usize = parts.next()?.parse().ok()?;
    let mut cur = events.get(index)?;
    for part in parts {
        cur = match cur {
            Value::Object(m) => m.get(part)?,
            Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn dotted<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(value, |cur, part| match cur {
        Value::Object(m) => m.get(part),
        Value::Array(a) => a.get(part.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Checks one fixture; returns (hard failures, soft notes).
fn check(fixture: &Value, out: &Outcome) -> (Vec<String>, Vec<String>) {
    let mut expect: Map<String, Value> = fixture["expect"].as_object().cloned().unwrap_or_default();
    if let Some(Value::Object(o)) = fixture.pointer("/expectOverrides/typescript") {
        for (k, v) in o {
            if k != "intentional" {
                expect.insert(k.clone(), v.clone());
            }
        }
    }
    let mut hard = Vec::new();
    let mut soft = Vec::new();
    let types: Vec<&str> = out
        .events
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    for (key, want) in &expect {
        match key.as_str() {
            "outcome" => {
                let got = if out.ok { "completed" } else { "failed" };
                if want != got {
                    hard.push(format!(
                        "outcome {got} (error: {:?}), expected {want}",
                        out.error
                    ));
                }
            }
            "errorContains" => {
                let want = want.as_str().unwrap_or_default().replace("\\\"", "\"");
                let got = out.error.clone().unwrap_or_default();
                if !want.is_empty() && !got.contains(&want) {
                    hard.push(format!("error {got:?} does not contain {want:?}"));
                }
            }
            "runError" => {
                let errors: Vec<&str> = out
                    .events
                    .iter()
                    .filter(|e| e["type"] == "RUN_ERROR")
                    .filter_map(|e| e["message"].as_str())
                    .collect();
                let hit = match want {
                    Value::Bool(true) => !errors.is_empty(),
                    Value::String(s) => errors.iter().any(|m| m.contains(s.as_str())),
                    _ => true,
                };
                if !hit {
                    hard.push(format!("no delivered RUN_ERROR matching {want}"));
                }
            }
            "eventTypes" => {
                let want: Vec<&str> = want
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                if want != types {
                    hard.push(format!("eventTypes {types:?}, expected {want:?}"));
                }
            }
            "eventTypesAbsent" => {
                for t in want.as_array().unwrap().iter().filter_map(Value::as_str) {
                    if types.contains(&t) {
                        hard.push(format!("{t} reached the application"));
                    }
                }
            }
            "eventPaths" => {
                for (path, v) in want.as_object().unwrap() {
                    match event_path(&out.events, path) {
                        Some(got) if got == v => {}
                        got => hard.push(format!("eventPaths {path}: {got:?}, expected {v}")),
                    }
                }
            }
            "eventAbsentPaths" => {
                for path in want.as_array().unwrap().iter().filter_map(Value::as_str) {
                    if let Some(got) = event_path(&out.events, path) {
                        hard.push(format!("eventAbsentPaths {path} present: {got}"));
                    }
                }
            }
            "messageCount" => {
                let n = out.messages.as_array().map_or(0, Vec::len);
                if Some(n as u64) != want.as_u64() {
                    hard.push(format!(
                        "messageCount {n}, expected {want}: {}",
                        out.messages
                    ));
                }
            }
            "messages" => {
                if let Err(e) = subset(want, &out.messages, "messages") {
                    hard.push(e);
                }
            }
            "state" => {
                if let Err(e) = subset(want, &out.state, "state") {
                    hard.push(e);
                }
            }
            "request" => {
                if let Err(e) = subset(want, &out.request, "request") {
                    hard.push(e);
                }
            }
            "requestAbsentPaths" => {
                for path in want.as_array().unwrap().iter().filter_map(Value::as_str) {
                    if dotted(&out.request, path).is_some() {
                        hard.push(format!("request carries {path}"));
                    }
                }
            }
            "warnings" => {
                for w in want.as_array().unwrap().iter().filter_map(Value::as_str) {
                    if !out.warnings.iter().any(|got| got.contains(w)) {
                        soft.push(format!(
                            "no warning containing {w:?} (got {:?})",
                            out.warnings
                        ));
                    }
                }
            }
            "noWarnings" => {
                if want == &Value::Bool(true) && !out.warnings.is_empty() {
                    soft.push(format!("warnings emitted: {:?}", out.warnings));
                }
            }
            other => hard.push(format!("unknown expect key {other}")),
        }
    }
    (hard, soft)
}

#[test]
fn conformance_streams() {
    let Some(dir) = common::spec_dir() else {
        return;
    };
    let streams = dir.join("1.1/conformance/streams");
    let manifest = std::fs::read_to_string(streams.join("MANIFEST.txt")).expect("MANIFEST.txt");
    let names: Vec<&str> = manifest
        .lines()
        .map(str::trim)
        .filter(|l| l.ends_with(".json"))
        .collect();
    assert!(names.len() >= 68, "corpus shrank: {}", names.len());

    let spec = common::Schema::load(&dir);
    let schema = spec.validator("");
    let input_schema = spec.validator("RunAgentInput");
    let mut passed = 0;
    let mut failures = Vec::new();
    let mut excepted = Vec::new();
    let mut soft_notes = Vec::new();
    for name in &names {
        let fixture = common::read_json(&streams.join(name));
        let out = run(&fixture, &schema);
        if let Err(e) = input_schema.validate(&out.request) {
            panic!(
                "{name}: our RunAgentInput is schema-invalid ({e}): {}",
                out.request
            );
        }
        let (hard, soft) = check(&fixture, &out);
        let stem = name.trim_end_matches(".json");
        if !soft.is_empty() {
            soft_notes.push(format!("{stem}: {}", soft.join("; ")));
        }
        if hard.is_empty() {
            passed += 1;
        } else if let Some((_, why)) = EXCEPTIONS.iter().find(|(n, _)| *n == stem) {
            excepted.push(format!("{stem} (excepted: {why}): {}", hard.join("; ")));
        } else {
            failures.push(format!("{stem}:\n    {}", hard.join("\n    ")));
        }
    }
    println!("conformance: {passed}/{} streams pass", names.len());
    for e in &excepted {
        println!("  excepted: {e}");
    }
    for s in &soft_notes {
        println!("  SHOULD-level (not enforced): {s}");
    }
    assert!(
        failures.is_empty(),
        "{} failing streams:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // An exception that now passes must be removed from the list.
    assert_eq!(passed + excepted.len(), names.len());
}
