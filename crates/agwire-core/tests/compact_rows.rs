//! `compact_events` against the reference client's `compactEvents`
//! (`@ag-ui/client` 1.0.0): what it merges, what it reorders, what it keeps.

use agwire_core::Event;
use agwire_core::apply::Session;
use agwire_core::compact::compact_events;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

fn events(values: &[Value]) -> Vec<Event> {
    values
        .iter()
        .map(|v| match Event::from_value(v.clone()) {
            Ok(decoded) => decoded.value,
            Err(error) => panic!("{v} does not decode: {error}"),
        })
        .collect()
}

fn compacted(values: &[Value]) -> Vec<Value> {
    compact_events(&events(values))
        .iter()
        .map(|e| match serde_json::to_value(e) {
            Ok(v) => v,
            Err(error) => panic!("{error}"),
        })
        .collect()
}

#[test]
fn text_deltas_merge_into_one_event() {
    let out = compacted(&[
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "metadata": {"s": 1}}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hel", "metadata": {"a": 1, "b": 1}, "subagentRunId": "sub"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "lo", "metadata": {"b": 2}}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"e": 1}}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "metadata": {"s": 1}}),
            // Only the merged metadata rides along: no attribution, as in the reference client.
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hello", "metadata": {"a": 1, "b": 2}}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"e": 1}}),
        ]
    );
}

#[test]
fn tool_call_arguments_merge_into_one_event() {
    let out = compacted(&[
        json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f", "parentMessageId": "p"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "{\"a\""}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": ":1}"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "tc"}),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "tc", "content": "ok"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f", "parentMessageId": "p"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "{\"a\":1}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "tc"}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "tc", "content": "ok"}),
        ]
    );
}

#[test]
fn events_inside_an_open_stream_wait_for_its_end() {
    let out = compacted(&[
        json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f"}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m"}),
        json!({"type": "CUSTOM", "name": "during", "value": 1}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a"}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
        json!({"type": "CUSTOM", "name": "after-text", "value": 2}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "{}"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "tc"}),
        json!({"type": "CUSTOM", "name": "after-all", "value": 3}),
    ]);
    let shape: Vec<String> = out
        .iter()
        .map(|e| {
            format!(
                "{}{}",
                e["type"].as_str().unwrap_or(""),
                e.get("name")
                    .map(|n| format!(":{}", n.as_str().unwrap_or("")))
                    .unwrap_or_default()
            )
        })
        .collect();
    // Open text messages are asked first; with the text closed, the tool call holds.
    assert_eq!(
        shape,
        [
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "CUSTOM:during",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "CUSTOM:after-text",
            "CUSTOM:after-all",
        ]
    );
}

#[test]
fn replayed_starts_keep_metadata_in_arrival_order() {
    // Before any delta: the starts' metadata merge.
    let before = compacted(&[
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"a": 1, "b": 1}}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "user", "metadata": {"b": 2}}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
    ]);
    assert_eq!(
        before[0],
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "user", "metadata": {"a": 1, "b": 2}})
    );

    // After a delta: the replay's fields win, its metadata follows the delta's.
    let after = compacted(&[
        json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f", "metadata": {"s": 1}}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "x", "metadata": {"k": "args"}}),
        json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "g", "metadata": {"k": "replay"}}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "tc"}),
    ]);
    assert_eq!(
        after[..2],
        [
            json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "g", "metadata": {"s": 1}}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "x", "metadata": {"k": "replay"}}),
        ]
    );
}

#[test]
fn state_collapses_into_one_snapshot_per_run() {
    let out = compacted(&[
        json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/pre", "value": 1}]}),
        json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
        json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/lost", "value": 1}], "metadata": {"d0": 1}}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": {"n": 1, "list": []}, "metadata": {"s": 1}}),
        json!({"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 2}], "metadata": {"s": 2}}),
        json!({"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/missing"}]}),
        json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/list/-", "value": "x"}]}),
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": null}),
    ]);
    assert_eq!(
        out,
        vec![
            // No snapshot before the run: its deltas pass through unchanged.
            json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/pre", "value": 1}]}),
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            // The last snapshot plus what follows; a failing delta is skipped;
            // metadata is collected from every state event of the window.
            json!({"type": "STATE_SNAPSHOT", "snapshot": {"n": 2, "list": ["x"]}, "metadata": {"d0": 1, "s": 2}}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
            json!({"type": "STATE_SNAPSHOT", "snapshot": null}),
        ]
    );
}

#[test]
fn unfinished_streams_are_flushed_at_the_end() {
    let out = compacted(&[
        json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f"}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "b"}),
        json!({"type": "STEP_STARTED", "stepName": "s"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "{}"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "ab"}),
            json!({"type": "STEP_STARTED", "stepName": "s"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "{}"}),
            json!({"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}}),
        ]
    );
}

#[test]
fn an_end_without_a_start_is_kept() {
    let out = compacted(&[
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"late": true}}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "tc"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x", "metadata": {"late": true}}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "tc"}),
        ]
    );
}

/// A well-formed stream in which nothing interleaves: runs of text messages,
/// tool calls, results and state events, one after another.
fn sequential_stream(rng: &mut StdRng) -> Vec<Value> {
    let mut out = Vec::new();
    let mut next = 0;
    let mut id = |prefix: &str| {
        next += 1;
        format!("{prefix}{next}")
    };
    for _ in 0..rng.random_range(1..4) {
        out.push(json!({"type": "RUN_STARTED", "threadId": "t", "runId": id("r")}));
        for _ in 0..rng.random_range(0..8) {
            let metadata = |rng: &mut StdRng| {
                if rng.random_bool(0.5) {
                    json!({"k": rng.random_range(0..3), "v": rng.random_range(0..3)})
                } else {
                    json!({})
                }
            };
            match rng.random_range(0..4) {
                0 => {
                    let m = id("m");
                    out.push(json!({"type": "TEXT_MESSAGE_START", "messageId": m, "metadata": metadata(rng)}));
                    for _ in 0..rng.random_range(0..4) {
                        out.push(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": "tok", "metadata": metadata(rng)}));
                    }
                    out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": m, "metadata": metadata(rng)}));
                }
                1 => {
                    let tc = id("tc");
                    out.push(json!({"type": "TOOL_CALL_START", "toolCallId": tc, "toolCallName": "f", "metadata": metadata(rng)}));
                    for _ in 0..rng.random_range(0..4) {
                        out.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": tc, "delta": "{}", "metadata": metadata(rng)}));
                    }
                    out.push(json!({"type": "TOOL_CALL_END", "toolCallId": tc}));
                    if rng.random_bool(0.5) {
                        out.push(json!({"type": "TOOL_CALL_RESULT", "messageId": id("res"), "toolCallId": tc, "content": "ok"}));
                    }
                }
                2 => out.push(json!({"type": "STATE_SNAPSHOT", "snapshot": {"n": rng.random_range(0..9), "l": []}})),
                _ => out.push(json!({"type": "STATE_DELTA", "delta": [
                    {"op": "add", "path": "/l/-", "value": rng.random_range(0..9)},
                ]})),
            }
        }
        out.push(json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}));
    }
    out
}

#[test]
fn folding_a_compacted_stream_gives_the_same_messages_and_state() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    for _ in 0..500 {
        let stream = events(&sequential_stream(&mut rng));
        let mut whole = Session::new(Vec::new(), json!({"n": 0, "l": []}));
        let mut short = whole.clone();
        whole.apply_all(&stream);
        let compact = compact_events(&stream);
        assert!(compact.len() <= stream.len());
        short.apply_all(&compact);
        assert_eq!(short.messages, whole.messages, "{stream:?}");
        assert_eq!(short.state, whole.state, "{stream:?}");
    }
}
