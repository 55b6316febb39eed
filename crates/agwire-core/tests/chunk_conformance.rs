//! The official conformance streams that exercise chunk expansion, run through
//! [`ChunkExpander`] alone: the expanded order where a fixture pins it, the
//! chunk error where it expects one, and the assembled text and tool calls
//! where it expects a completed run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agwire_core::Event;
use agwire_core::chunk::ChunkExpander;
use serde_json::Value;

/// Every fixture that carries a chunk; if the suite gains or loses one, this
/// list must be revisited rather than silently diverge.
const CHUNK_FIXTURES: &[&str] = &[
    "chunk-conflicting-role-fatal",
    "chunk-conflicting-tool-name-fatal",
    "chunk-expansion-assembles",
    "chunk-repeat-identical-accepted",
    "custom-closes-chunk-stream-fatal",
    "first-chunk-missing-id-fatal",
    "first-tool-chunk-missing-name-fatal",
    "raw-does-not-close-chunk-stream",
    "subagent-terminal-closes-open-chunk-stream",
];

fn streams_dir() -> Option<PathBuf> {
    common::spec_dir().map(|spec| spec.join("1.1/conformance/streams"))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixtures(dir: &Path) -> Vec<(String, Value)> {
    let mut all: Vec<(String, Value)> = std::fs::read_dir(dir)
        .expect("streams directory")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            (name, read_json(&path))
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

fn has_chunk(fixture: &Value) -> bool {
    fixture["stream"].as_array().unwrap().iter().any(|event| {
        event["type"]
            .as_str()
            .is_some_and(|name| name.ends_with("_CHUNK"))
    })
}

/// Decodes and expands `stream`: what came out, and the chunk error if any.
fn expand(stream: &[Value]) -> (Vec<Event>, Option<String>) {
    let mut expander = ChunkExpander::new();
    let mut out = Vec::new();
    for value in stream {
        let event = Event::from_json(&value.to_string())
            .unwrap_or_else(|e| panic!("{value} does not decode: {e}"))
            .value;
        if let Err(error) = expander.push(event, &mut out) {
            return (out, Some(error.message));
        }
    }
    (out, None)
}

#[derive(Debug, Default)]
struct Folded {
    role: Option<String>,
    subagent: Option<String>,
    content: String,
    tool_calls: Vec<(String, String, String)>,
}

/// Just enough of the reference fold to see what the chunks assembled into,
/// and to insist that every triad is well formed.
fn fold(events: &[Event]) -> Result<BTreeMap<String, Folded>, String> {
    let mut messages: BTreeMap<String, Folded> = BTreeMap::new();
    let mut open_messages: Vec<String> = Vec::new();
    let mut open_calls: Vec<(String, Option<String>)> = Vec::new();
    for event in events {
        match event {
            Event::TextMessageStart(e) => {
                let message = messages.entry(e.message_id.clone()).or_default();
                message.role = e.role.map(|r| r.as_str().to_owned());
                message.subagent.clone_from(&e.subagent_run_id);
                open_messages.push(e.message_id.clone());
            }
            Event::TextMessageContent(e) => {
                if !open_messages.contains(&e.message_id) {
                    return Err(format!("content for unopened message {}", e.message_id));
                }
                messages.get_mut(&e.message_id).unwrap().content += &e.delta;
            }
            Event::TextMessageEnd(e) => {
                let Some(at) = open_messages.iter().position(|id| *id == e.message_id) else {
                    return Err(format!("end for unopened message {}", e.message_id));
                };
                open_messages.remove(at);
            }
            Event::ToolCallStart(e) => {
                let parent = e.parent_message_id.clone();
                if let Some(parent) = &parent {
                    messages
                        .entry(parent.clone())
                        .or_default()
                        .tool_calls
                        .push((
                            e.tool_call_id.clone(),
                            e.tool_call_name.clone(),
                            String::new(),
                        ));
                }
                open_calls.push((e.tool_call_id.clone(), parent));
            }
            Event::ToolCallArgs(e) => {
                let Some((_, parent)) = open_calls.iter().find(|(id, _)| *id == e.tool_call_id)
                else {
                    return Err(format!("args for unopened call {}", e.tool_call_id));
                };
                if let Some(parent) = parent {
                    let calls = &mut messages.get_mut(parent).unwrap().tool_calls;
                    let call = calls.iter_mut().find(|c| c.0 == e.tool_call_id).unwrap();
                    call.2 += &e.delta;
                }
            }
            Event::ToolCallEnd(e) => {
                let Some(at) = open_calls.iter().position(|(id, _)| *id == e.tool_call_id) else {
                    return Err(format!("end for unopened call {}", e.tool_call_id));
                };
                open_calls.remove(at);
            }
            Event::RunFinished(_) if !open_messages.is_empty() || !open_calls.is_empty() => {
                return Err(format!(
                    "run finished with {open_messages:?} and {open_calls:?} still open"
                ));
            }
            _ => {}
        }
    }
    Ok(messages)
}

fn check_messages(name: &str, folded: &BTreeMap<String, Folded>, expected: &[Value]) {
    for message in expected {
        let id = message["id"].as_str().unwrap();
        let got = folded
            .get(id)
            .unwrap_or_else(|| panic!("{name}: message {id} not assembled: {folded:#?}"));
        if let Some(role) = message["role"].as_str() {
            assert_eq!(got.role.as_deref(), Some(role), "{name}: role of {id}");
        }
        if let Some(content) = message["content"].as_str() {
            assert_eq!(got.content, content, "{name}: content of {id}");
        }
        assert_eq!(
            got.subagent.as_deref(),
            message["subagentRunId"].as_str(),
            "{name}: subagentRunId of {id}"
        );
        let calls = message["toolCalls"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        let expected_calls: Vec<(String, String, String)> = calls
            .iter()
            .map(|call| {
                (
                    call["id"].as_str().unwrap().to_owned(),
                    call["function"]["name"].as_str().unwrap().to_owned(),
                    call["function"]["arguments"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(got.tool_calls, expected_calls, "{name}: tool calls of {id}");
    }
}

#[test]
fn chunk_fixtures_expand_as_the_reference_client_does() {
    let Some(dir) = streams_dir() else { return };
    let all = fixtures(&dir);
    let with_chunks: Vec<&str> = all
        .iter()
        .filter(|(_, f)| has_chunk(f))
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(with_chunks, CHUNK_FIXTURES, "the chunk fixtures changed");

    let mut checked_orders = 0;
    for (name, fixture) in all.iter().filter(|(_, f)| has_chunk(f)) {
        let stream = fixture["stream"].as_array().unwrap();
        let expect = &fixture["expect"];
        let (out, error) = expand(stream);

        match expect["errorContains"].as_str().filter(|s| !s.is_empty()) {
            Some(needle) => {
                let error = error
                    .as_deref()
                    .unwrap_or_else(|| panic!("{name}: expected an error containing {needle:?}"));
                assert!(
                    error.contains(needle),
                    "{name}: {error:?} does not contain {needle:?}"
                );
                assert_eq!(expect["outcome"], "failed", "{name}");
            }
            None => {
                assert_eq!(error, None, "{name}: unexpected chunk error");
                assert_eq!(expect["outcome"], "completed", "{name}");
            }
        }

        let event_types = fixture["expectOverrides"]["typescript"]["eventTypes"]
            .as_array()
            .or_else(|| expect["eventTypes"].as_array());
        if let Some(event_types) = event_types {
            let expected: Vec<&str> = event_types.iter().map(|t| t.as_str().unwrap()).collect();
            let got: Vec<&str> = out.iter().map(Event::type_name).collect();
            assert_eq!(got, expected, "{name}: expanded event order");
            checked_orders += 1;
        }

        if error.is_none() {
            let folded = fold(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
            if let Some(messages) = expect["messages"].as_array() {
                check_messages(name, &folded, messages);
            }
            if let Some(count) = expect["messageCount"].as_u64() {
                assert_eq!(folded.len() as u64, count, "{name}: message count");
            }
        }
    }
    assert!(checked_orders >= 1, "no fixture pinned an expanded order");
    println!(
        "chunk conformance: {} fixtures, {checked_orders} with a pinned order",
        CHUNK_FIXTURES.len()
    );
}

/// Without a chunk, expansion is the identity, whatever else the stream holds.
#[test]
fn chunkless_fixtures_pass_through_unchanged() {
    let Some(dir) = streams_dir() else { return };
    let mut streams = 0;
    for (name, fixture) in fixtures(&dir).iter().filter(|(_, f)| !has_chunk(f)) {
        let events: Vec<Event> = fixture["stream"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|value| Event::from_json(&value.to_string()).ok())
            .map(|decoded| decoded.value)
            .collect();
        let mut expander = ChunkExpander::new();
        let mut out = Vec::new();
        for event in events.iter().cloned() {
            expander
                .push(event, &mut out)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert_eq!(out, events, "{name}");
        streams += 1;
    }
    assert!(streams >= 50, "only {streams} chunk-less fixtures");
}
