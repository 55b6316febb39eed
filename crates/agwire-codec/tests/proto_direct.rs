//! The direct protobuf encoder (`encode_event`, `encode_frame`: written
//! straight from our types) against prost's encoding of the message tree
//! the test kit's oracle builds (`agwire_testkit::proto_oracle::to_proto`, a
//! second, independent writing of the mapping): the same bytes for every event of the official
//! fixtures, 10,000 generated events, and hand-written edge cases (lengths
//! that need multi-byte varints, negative timestamps, empty and absent
//! fields, every message role and content part, deep JSON).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;

use agwire_codec::proto::{FrameDecoder, encode_event, encode_frame};
use agwire_core::Event;
use agwire_testkit::proto_oracle::to_proto;
use prost::Message as _;
use serde_json::{Value, json};

fn ev(v: Value) -> Event {
    let text = v.to_string();
    let decoded = Event::from_value(v).unwrap();
    assert!(
        decoded.warnings.is_empty(),
        "{text}: {:?}",
        decoded.warnings
    );
    decoded.value
}

fn big_state(items: usize) -> Value {
    let items: Vec<Value> = (0..items)
        .map(|i| json!({"id": format!("item-{i}"), "done": i % 3 == 0, "score": i * 7 % 100, "tags": ["a", {"": null}], "nested": {"deep": [[[i]]]}}))
        .collect();
    json!({"version": 3, "items": items, "filter": {"status": "all", "query": null, "": ""}})
}

fn edge_cases() -> Vec<Event> {
    let long = "x".repeat(200_000);
    let parts = json!([
        {"type": "text", "text": "see", "id": "p1", "metadata": {"k": [1, 2]}},
        {"type": "image", "source": {"type": "url", "value": "https://x/y.png", "mimeType": "image/png"}, "id": "p2"},
        {"type": "audio", "source": {"type": "data", "value": "AAAA", "mimeType": "audio/wav"}, "metadata": [null]},
        {"type": "video", "source": {"type": "file", "value": "f-1", "provider": "openai"}},
        {"type": "document", "source": {"type": "file", "value": "", "mimeType": ""}, "id": ""}
    ]);
    let messages = json!([
        {"id": "d", "role": "developer", "content": "dev", "name": "n"},
        {"id": "s", "role": "system", "content": "", "encryptedValue": "e", "encryptedValueType": "t"},
        {"id": "a", "role": "assistant", "content": "hi", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}, "metadata": {"m": 1}, "encryptedValue": "v"},
            {"id": "c2", "type": "function", "function": {"name": "", "arguments": ""}}
        ], "metadata": {"ag-ui": {"x": 1}}, "subagentRunId": "sub"},
        {"id": "a2", "role": "assistant"},
        {"id": "u", "role": "user", "content": parts},
        {"id": "u2", "role": "user", "content": "plain", "name": "me"},
        {"id": "t", "role": "tool", "content": "r", "toolCallId": "c1", "error": "bad"},
        {"id": "t2", "role": "tool", "content": [{"type": "text", "text": "x"}], "toolCallId": "c2"},
        {"id": "ac", "role": "activity", "activityType": "PLAN", "content": {"steps": [1, 2], "": {}}},
        {"id": "r", "role": "reasoning", "content": "hm", "encryptedValue": "z"}
    ]);
    let input = json!({
        "threadId": "t", "runId": "r", "parentRunId": "p", "state": big_state(3),
        "messages": messages, "tools": [{"name": "f", "description": "d", "parameters": {"type": "object"}, "metadata": {"a": true}}, {"name": "g", "description": ""}],
        "context": [{"description": "c", "value": "v"}, {"description": "", "value": ""}],
        "forwardedProps": {"x": [null]},
        "resume": [{"interruptId": "i", "status": "resolved", "payload": 5, "metadata": {"b": 1}}, {"interruptId": "j", "status": "cancelled"}],
        "protocolVersion": "1.1"
    });
    [
        json!({"type": "TEXT_MESSAGE_START", "messageId": "", "role": "assistant", "timestamp": -1}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "name": "", "subagentRunId": "", "timestamp": 0}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": long, "timestamp": 9_007_199_254_740_991_i64}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x".repeat(127)}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x".repeat(128), "rawEvent": {"a": 1}, "metadata": {"k": "v", "": 1}}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m", "timestamp": -9_007_199_254_740_991_i64}),
        json!({"type": "TEXT_MESSAGE_CHUNK"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "", "role": "user", "delta": "", "name": ""}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "", "parentMessageId": "m", "delta": "{"}),
        json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "parentMessageId": ""}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "日本語"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "", "subagentRunId": "s"}),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": "", "role": "tool"}),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": parts}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": big_state(600)}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": null}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": [[], {}, "", 0, -0.0, 1e300, -2.5, true, false]}),
        json!({"type": "STATE_DELTA", "delta": [
            {"op": "add", "path": "/a", "value": big_state(2)},
            {"op": "remove", "path": "/b", "value": 3, "from": "/leftover"},
            {"op": "replace", "path": "", "value": null},
            {"op": "move", "from": "/x", "path": "/y"},
            {"op": "copy", "from": "", "path": "/z", "extra": 1},
            {"op": "test", "path": "/t", "value": "v"}
        ]}),
        json!({"type": "STATE_DELTA", "delta": []}),
        json!({"type": "MESSAGES_SNAPSHOT", "messages": messages}),
        json!({"type": "MESSAGES_SNAPSHOT", "messages": []}),
        json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "PLAN", "content": {}, "replace": false}),
        json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "", "content": {"a": big_state(2)}, "replace": true}),
        json!({"type": "ACTIVITY_DELTA", "messageId": "m", "activityType": "PLAN", "patch": [{"op": "add", "path": "/a", "value": 1}]}),
        json!({"type": "RAW", "event": {"provider": [1, 2]}, "source": ""}),
        json!({"type": "CUSTOM", "name": "", "value": null}),
        json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "input": input}),
        json!({"type": "RUN_STARTED", "threadId": "", "runId": "", "parentRunId": "", "protocolVersion": ""}),
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": {"ok": true}, "outcome": {"type": "success", "pendingToolCallIds": ["a", ""]},
               "usage": [{"provider": "p", "model": "m", "inputTokens": 1, "outputTokens": 0, "totalTokens": 9_007_199_254_740_991_u64, "reasoningTokens": 5, "cachedInputTokens": 6, "cacheWriteInputTokens": 7}, {}]}),
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "interrupt", "interrupts": [
            {"id": "i", "reason": "approval", "message": "ok?", "toolCallId": "c", "responseSchema": {"type": "object"}, "expiresAt": "2026-01-01T00:00:00Z", "metadata": {"k": 1}, "subagentRunId": "s"},
            {"id": "j", "reason": ""}
        ]}}),
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "cancelled"}}),
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": [null, {}]}),
        json!({"type": "RUN_ERROR", "message": "", "code": ""}),
        json!({"type": "RUN_ERROR", "message": "boom", "usage": [{"inputTokens": 3}]}),
        json!({"type": "STEP_STARTED", "stepName": "s", "subagentRunId": "x"}),
        json!({"type": "STEP_FINISHED", "stepName": ""}),
        json!({"type": "REASONING_START", "messageId": "r"}),
        json!({"type": "REASONING_MESSAGE_START", "messageId": "r", "role": "reasoning"}),
        json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": "d"}),
        json!({"type": "REASONING_MESSAGE_END", "messageId": "r"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r", "delta": ""}),
        json!({"type": "REASONING_MESSAGE_CHUNK"}),
        json!({"type": "REASONING_END", "messageId": "r", "subagentRunId": "s"}),
        json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "tool-call", "entityId": "c", "encryptedValue": "e", "encryptedValueType": "t"}),
        json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "", "encryptedValue": ""}),
        json!({"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n", "description": "", "parentSubagentRunId": "p", "parentToolCallId": "c", "parentMessageId": "m"}),
        json!({"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "result": [1], "outcome": {"type": "suspended", "interruptIds": ["i", ""]}}),
        json!({"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"type": "success"}}),
        json!({"type": "SUBAGENT_FINISHED", "subagentRunId": ""}),
        json!({"type": "SUBAGENT_ERROR", "subagentRunId": "s", "message": "m", "code": "c"}),
    ]
    .into_iter()
    .map(ev)
    .collect()
}

fn check(events: &[Event]) {
    same_bytes(events);
    // And the frames read back.
    let mut body = Vec::new();
    for e in events {
        encode_frame(e, &mut body).unwrap();
    }
    let mut decoder = FrameDecoder::new();
    let mut back = Vec::new();
    decoder.push(&body, &mut back).unwrap();
    decoder.finish().unwrap();
    assert_eq!(back.len(), events.len());
}

fn same_bytes(events: &[Event]) {
    let mut body = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let tree = to_proto(e).unwrap().encode_to_vec();
        let direct = encode_event(e).unwrap();
        assert!(
            tree == direct,
            "event {i} encodes differently: {}",
            e.to_json()
        );
        let at = body.len();
        encode_frame(e, &mut body).unwrap();
        assert_eq!(&body[at..at + 4], &(tree.len() as u32).to_be_bytes());
        assert_eq!(&body[at + 4..], &tree[..], "frame {i}");
    }
}

#[test]
fn edge_cases_encode_as_the_tree_does() {
    let events = edge_cases();
    // Every event type with a protobuf form is covered.
    let mut types: Vec<&str> = events.iter().map(Event::type_name).collect();
    types.sort_unstable();
    types.dedup();
    assert_eq!(types.len(), 31, "{types:?}");
    check(&events);
    // Counts past i64 (not reachable from JSON) saturate alike.
    let mut e = ev(json!({"type": "RUN_ERROR", "message": "m", "usage": [{"inputTokens": 1}]}));
    if let Event::RunError(r) = &mut e {
        r.usage.as_mut().unwrap()[0].input_tokens = Some(u64::MAX);
    }
    same_bytes(&[e]);
}

#[test]
fn fixture_events_encode_as_the_tree_does() {
    check(&common::fixture_events());
}

#[test]
fn generated_events_encode_as_the_tree_does() {
    check(&common::sample_events(0xD1_2EC7, 10_000));
}

#[test]
fn unknown_events_have_no_form() {
    let e = Event::from_json(r#"{"type":"FUTURE","x":1}"#)
        .unwrap()
        .value;
    assert!(encode_event(&e).is_err());
    let mut out = vec![1, 2, 3];
    assert!(encode_frame(&e, &mut out).is_err());
    assert_eq!(out, [1, 2, 3], "nothing is left behind");
}
