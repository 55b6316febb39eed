use serde_json::{Value, json};

use super::*;

fn event(value: Value) -> Event {
    let text = value.to_string();
    Event::from_value(value)
        .unwrap_or_else(|e| panic!("{text} does not decode: {e}"))
        .value
}

fn wire(event: &Event) -> Value {
    serde_json::to_value(event).expect("serializes")
}

/// Feeds `stream` in order; the expanded stream, or the first error and what
/// came out before it.
fn expand(stream: Vec<Value>) -> (Vec<Value>, Option<String>) {
    let mut expander = ChunkExpander::new();
    let mut out = Vec::new();
    for value in stream {
        if let Err(e) = expander.push(event(value), &mut out) {
            return (out.iter().map(wire).collect(), Some(e.message));
        }
    }
    (out.iter().map(wire).collect(), None)
}

fn expand_ok(stream: Vec<Value>) -> Vec<Value> {
    let (out, error) = expand(stream);
    assert_eq!(error, None, "unexpected error; expanded so far: {out:#?}");
    out
}

fn expand_err(stream: Vec<Value>) -> String {
    let (out, error) = expand(stream);
    error.unwrap_or_else(|| panic!("expected an error; expanded: {out:#?}"))
}

fn types(out: &[Value]) -> Vec<&str> {
    out.iter()
        .map(|e| e["type"].as_str().unwrap_or("?"))
        .collect()
}

fn run_started() -> Value {
    json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
}

fn run_finished() -> Value {
    json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
}

// --- the three kinds --------------------------------------------------

#[test]
fn text_chunks_expand_into_the_triad() {
    let out = expand_ok(vec![
        run_started(),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "Hello"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": " world"}),
        run_finished(),
    ]);
    assert_eq!(
        out,
        vec![
            run_started(),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " world"}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
            run_finished(),
        ]
    );
}

#[test]
fn text_opener_carries_explicit_role_and_name() {
    let out = expand_ok(vec![json!({
        "type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "user", "name": "ann"
    })]);
    assert_eq!(
        out,
        vec![json!({
            "type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "user", "name": "ann"
        })]
    );
}

#[test]
fn tool_chunks_expand_into_the_triad() {
    let out = expand_ok(vec![
        json!({
            "type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "search",
            "parentMessageId": "m1", "delta": "{\"q\":"
        }),
        json!({"type": "TOOL_CALL_CHUNK", "delta": "1}"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "search"}),
        run_finished(),
    ]);
    assert_eq!(
        out,
        vec![
            json!({
                "type": "TOOL_CALL_START", "toolCallId": "tc1", "toolCallName": "search",
                "parentMessageId": "m1"
            }),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": "{\"q\":"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": "1}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "tc1"}),
            run_finished(),
        ]
    );
}

#[test]
fn tool_opener_without_parent_omits_it() {
    let out = expand_ok(vec![
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f"}),
    ]);
    assert_eq!(
        out,
        vec![json!({"type": "TOOL_CALL_START", "toolCallId": "tc1", "toolCallName": "f"})]
    );
}

#[test]
fn reasoning_chunks_expand_with_the_reasoning_role() {
    let out = expand_ok(vec![
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": "Think"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "delta": "ing"}),
        json!({"type": "RUN_ERROR", "message": "boom"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "Think"}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "ing"}),
            json!({"type": "REASONING_MESSAGE_END", "messageId": "r1"}),
            json!({"type": "RUN_ERROR", "message": "boom"}),
        ]
    );
}

#[test]
fn an_empty_delta_is_content_not_a_close() {
    let out = expand_ok(vec![
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": ""}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "delta": ""}),
    ]);
    assert_eq!(
        types(&out),
        [
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT"
        ]
    );
}

#[test]
fn an_empty_id_is_a_present_id() {
    let out = expand_ok(vec![
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": "a"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "", "delta": "b"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "a"}),
            json!({"type": "REASONING_MESSAGE_END", "messageId": "r1"}),
            json!({"type": "REASONING_MESSAGE_START", "messageId": "", "role": "reasoning"}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "", "delta": "b"}),
        ]
    );
}

#[test]
fn the_stream_end_synthesizes_nothing() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f", "subagentRunId": "s"}),
    ]);
    assert_eq!(
        types(&out),
        [
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TOOL_CALL_START"
        ]
    );
}

// --- metadata, rawEvent, timestamp -------------------------------------

#[test]
fn opener_metadata_goes_on_start_and_content_raw_event_on_content_only() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m0"}),
        json!({
            "type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a",
            "timestamp": 5, "metadata": {"k": 1}, "rawEvent": {"p": true}
        }),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m0"}),
            json!({
                "type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant",
                "metadata": {"k": 1}
            }),
            json!({
                "type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a",
                "metadata": {"k": 1}, "rawEvent": {"p": true}
            }),
        ]
    );
}

#[test]
fn opener_with_only_a_raw_event_still_yields_content() {
    let out = expand_ok(vec![json!({
        "type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f",
        "rawEvent": "native"
    })]);
    assert_eq!(
        out,
        vec![
            json!({"type": "TOOL_CALL_START", "toolCallId": "tc1", "toolCallName": "f"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": "", "rawEvent": "native"}),
        ]
    );
}

#[test]
fn opener_with_only_metadata_yields_start_only() {
    let out = expand_ok(vec![json!({
        "type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "metadata": {"k": 1}
    })]);
    assert_eq!(
        out,
        vec![json!({
            "type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning",
            "metadata": {"k": 1}
        })]
    );
}

#[test]
fn metadata_only_continuation_yields_an_empty_content_event() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "metadata": {"usage": 3}, "timestamp": 9}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f", "subagentRunId": "s"}),
        json!({"type": "TOOL_CALL_CHUNK", "metadata": {"finish": "stop"}}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "subagentRunId": "x"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "metadata": {}}),
    ]);
    assert_eq!(
        &out[2..3],
        [
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "", "metadata": {"usage": 3}})
        ]
    );
    assert_eq!(
        &out[4..5],
        [json!({
            "type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": "",
            "metadata": {"finish": "stop"}, "subagentRunId": "s"
        })]
    );
    assert_eq!(
        &out[6..],
        [json!({
            "type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "",
            "metadata": {}, "subagentRunId": "x"
        })]
    );
}

#[test]
fn raw_event_only_continuation_yields_an_empty_content_event() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "rawEvent": [1], "metadata": {"a": null}}),
    ]);
    assert_eq!(
        out[1],
        json!({
            "type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "",
            "rawEvent": [1], "metadata": {"a": null}
        })
    );
}

#[test]
fn an_empty_continuation_yields_nothing() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
        json!({"type": "TEXT_MESSAGE_CHUNK"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "timestamp": 1}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "role": "assistant"}),
    ]);
    assert_eq!(types(&out), ["TEXT_MESSAGE_START"]);
}

#[test]
fn the_closing_end_never_takes_the_new_chunks_metadata() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "delta": "b", "metadata": {"k": 2}}),
    ]);
    assert_eq!(
        out[2..],
        [
            json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant", "metadata": {"k": 2}}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": "b", "metadata": {"k": 2}}),
        ]
    );
}

// --- what closes what --------------------------------------------------

#[test]
fn a_new_id_or_kind_in_the_same_lane_closes_the_previous_stream() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc1", "toolCallName": "f", "delta": "{}"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "tc2", "toolCallName": "g"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "m1", "delta": "r"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "b"}),
    ]);
    assert_eq!(
        types(&out),
        [
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_START",
            "TOOL_CALL_END",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
        ]
    );
    assert_eq!(
        out[5],
        json!({"type": "TOOL_CALL_END", "toolCallId": "tc1"})
    );
}

#[test]
fn raw_and_other_asides_do_not_close() {
    let asides = [
        json!({"type": "RAW", "event": {"x": 1}}),
        json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "a1", "activityType": "plan", "content": {}}),
        json!({"type": "ACTIVITY_DELTA", "messageId": "a1", "activityType": "plan", "patch": []}),
        json!({
            "type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "m1",
            "encryptedValue": "xyz"
        }),
        json!({"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "n"}),
        json!({"type": "SOMETHING_FROM_THE_FUTURE", "x": 1}),
    ];
    for aside in asides {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
            aside.clone(),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "b"}),
        ]);
        assert_eq!(out[2], aside, "passes through unchanged");
        assert_eq!(
            out[3],
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"}),
            "{aside} must not close the stream"
        );
        assert_eq!(out.len(), 4);
    }
}

#[test]
fn explicit_events_close_their_own_lane() {
    let closers = [
        json!({"type": "CUSTOM", "name": "n", "value": null}),
        json!({"type": "STEP_STARTED", "stepName": "s"}),
        json!({"type": "STEP_FINISHED", "stepName": "s"}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": {}}),
        json!({"type": "STATE_DELTA", "delta": []}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "x"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "x", "delta": "d"}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "x"}),
        json!({"type": "TOOL_CALL_START", "toolCallId": "x", "toolCallName": "f"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "x", "delta": "d"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "x"}),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "y", "content": "c"}),
        json!({"type": "REASONING_START", "messageId": "x"}),
        json!({"type": "REASONING_MESSAGE_START", "messageId": "x", "role": "reasoning"}),
        json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "x", "delta": "d"}),
        json!({"type": "REASONING_MESSAGE_END", "messageId": "x"}),
        json!({"type": "REASONING_END", "messageId": "x"}),
    ];
    for closer in closers {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "delta": "b", "subagentRunId": "s"}),
            closer.clone(),
        ]);
        assert_eq!(
            out[4..],
            [
                json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
                closer.clone()
            ],
            "{closer} closes the parent lane only"
        );

        let mut tagged = closer.clone();
        tagged["subagentRunId"] = json!("s");
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "delta": "b", "subagentRunId": "s"}),
            tagged.clone(),
        ]);
        assert_eq!(
            out[4..],
            [
                json!({"type": "TEXT_MESSAGE_END", "messageId": "m2", "subagentRunId": "s"}),
                tagged
            ],
            "{closer} tagged closes the subagent lane only"
        );
    }
}

#[test]
fn custom_closes_so_an_idless_continuation_is_fatal() {
    let error = expand_err(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}),
        json!({"type": "CUSTOM", "name": "n", "value": 1}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "b"}),
    ]);
    assert_eq!(error, "First TEXT_MESSAGE_CHUNK must have a messageId");
}

#[test]
fn run_level_events_close_every_lane_in_opening_order() {
    for terminal in [
        run_started(),
        run_finished(),
        json!({"type": "RUN_ERROR", "message": "m"}),
        json!({"type": "MESSAGES_SNAPSHOT", "messages": []}),
    ] {
        let out = expand_ok(vec![
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "b", "toolCallName": "f"}),
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "c", "subagentRunId": "s2"}),
            // Reopening a lane moves it to the back of the closing order.
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "d", "subagentRunId": "s1"}),
            // Continuing does not.
            json!({"type": "TOOL_CALL_CHUNK", "delta": "x"}),
            terminal.clone(),
        ]);
        assert_eq!(
            out[6..],
            [
                json!({"type": "TOOL_CALL_END", "toolCallId": "b"}),
                json!({"type": "REASONING_MESSAGE_END", "messageId": "c", "subagentRunId": "s2"}),
                json!({"type": "TEXT_MESSAGE_END", "messageId": "d", "subagentRunId": "s1"}),
                terminal.clone(),
            ]
        );
        // Closed means closed: nothing more for a second terminal.
        let mut expander = ChunkExpander::new();
        let mut out = Vec::new();
        expander
            .push(
                event(json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m"})),
                &mut out,
            )
            .expect("opens");
        expander
            .push(event(terminal.clone()), &mut out)
            .expect("closes");
        expander
            .push(event(terminal.clone()), &mut out)
            .expect("passes");
        assert_eq!(out.len(), 4);
    }
}

#[test]
fn subagent_terminals_close_their_own_lane_only() {
    for terminal in [
        json!({"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"}),
        json!({"type": "SUBAGENT_ERROR", "subagentRunId": "s1", "message": "m"}),
    ] {
        let out = expand_ok(vec![
            json!({"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "n"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "p", "delta": "parent"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "half ", "subagentRunId": "s1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "done", "subagentRunId": "s1"}),
            terminal.clone(),
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": " more"}),
        ]);
        assert_eq!(
            out[3..],
            [
                json!({
                    "type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant",
                    "subagentRunId": "s1"
                }),
                json!({
                    "type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "half ",
                    "subagentRunId": "s1"
                }),
                json!({
                    "type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "done",
                    "subagentRunId": "s1"
                }),
                json!({"type": "TEXT_MESSAGE_END", "messageId": "m1", "subagentRunId": "s1"}),
                terminal.clone(),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "p", "delta": " more"}),
            ]
        );
    }
}

#[test]
fn a_non_chunk_event_with_nothing_open_passes_through_unchanged() {
    let value = json!({
        "type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "y", "content": "c",
        "timestamp": 1, "metadata": {"m": 1}, "rawEvent": 0
    });
    assert_eq!(expand_ok(vec![value.clone()]), vec![value]);
}

// --- lanes ---------------------------------------------------------------

#[test]
fn concurrent_subagents_assemble_independently() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "delta": "1", "subagentRunId": "s1"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "b", "delta": "2", "subagentRunId": "s2"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "3", "subagentRunId": "s1"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "4", "subagentRunId": "s2"}),
        // An id already open continues in its own lane even when untagged, and
        // what is emitted is attributed to that lane.
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "delta": "5"}),
    ]);
    assert_eq!(
        out[4..],
        [
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "3", "subagentRunId": "s1"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "b", "delta": "4", "subagentRunId": "s2"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "5", "subagentRunId": "s1"}),
        ]
    );
}

#[test]
fn an_untagged_continuation_prefers_the_parent() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "p"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
    ]);
    assert_eq!(
        out[2],
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "p", "delta": "x"})
    );
}

#[test]
fn an_untagged_continuation_falls_back_to_the_sole_open_stream() {
    // The parent has a tool call in flight; the only open text is s1's.
    let out = expand_ok(vec![
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t", "toolCallName": "f"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r", "subagentRunId": "s2"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
    ]);
    assert_eq!(
        out[3..],
        [
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "x", "subagentRunId": "s1"})
        ]
    );
}

#[test]
fn a_tagged_idless_chunk_in_a_lane_with_nothing_of_its_kind_is_a_first_chunk() {
    let error = expand_err(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x", "subagentRunId": "s1"}),
    ]);
    assert_eq!(error, "First TEXT_MESSAGE_CHUNK must have a messageId");
}

#[test]
fn ambiguous_continuations_are_fatal() {
    let error = expand_err(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "b", "subagentRunId": "s2"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
    ]);
    assert_eq!(
        error,
        "Ambiguous TEXT_MESSAGE_CHUNK: it carries neither a messageId nor a subagentRunId, but 2 lanes have an open text message. Attribute the chunk to the subagent it belongs to."
    );
    let error = expand_err(vec![
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "a", "toolCallName": "f", "subagentRunId": "s1"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "b", "toolCallName": "f", "subagentRunId": "s2"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "f", "subagentRunId": "s3"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "p"}),
        json!({"type": "TOOL_CALL_CHUNK", "delta": "x"}),
    ]);
    assert_eq!(
        error,
        "Ambiguous TOOL_CALL_CHUNK: it carries neither a toolCallId nor a subagentRunId, but 3 lanes have an open tool call. Attribute the chunk to the subagent it belongs to."
    );
    let error = expand_err(vec![
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "a", "subagentRunId": "s1"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "b", "subagentRunId": "s2"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "metadata": {}}),
    ]);
    assert_eq!(
        error,
        "Ambiguous REASONING_MESSAGE_CHUNK: it carries neither a messageId nor a subagentRunId, but 2 lanes have an open reasoning message. Attribute the chunk to the subagent it belongs to."
    );
}

#[test]
fn owner_conflicts_are_fatal() {
    let error = expand_err(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "subagentRunId": "s1"}),
    ]);
    assert_eq!(
        error,
        "Cannot continue text message 'm1': chunk subagentRunId 's1' does not match the open stream's subagent '(the parent agent)'."
    );
    let error = expand_err(vec![
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "f", "subagentRunId": "s1"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "subagentRunId": "s2", "delta": "x"}),
    ]);
    assert_eq!(
        error,
        "Cannot continue tool call 't1': chunk subagentRunId 's2' does not match the open stream's subagent 's1'."
    );
    let error = expand_err(vec![
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "subagentRunId": "s1"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "subagentRunId": "s2"}),
    ]);
    assert_eq!(
        error,
        "Cannot continue reasoning message 'r1': chunk subagentRunId 's2' does not match the open stream's subagent 's1'."
    );
}

// --- first chunks and opener agreement -------------------------------------

#[test]
fn first_chunks_need_their_ids() {
    let cases = [
        (
            json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
            "First TEXT_MESSAGE_CHUNK must have a messageId",
        ),
        (
            json!({"type": "TOOL_CALL_CHUNK", "toolCallName": "f", "delta": "x"}),
            "First TOOL_CALL_CHUNK must have a toolCallId",
        ),
        (
            json!({"type": "TOOL_CALL_CHUNK"}),
            "First TOOL_CALL_CHUNK must have a toolCallId",
        ),
        (
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "delta": "x"}),
            "First TOOL_CALL_CHUNK must have a toolCallName",
        ),
        (
            json!({"type": "REASONING_MESSAGE_CHUNK", "delta": "x"}),
            "First REASONING_MESSAGE_CHUNK must have a messageId",
        ),
    ];
    for (chunk, message) in cases {
        assert_eq!(expand_err(vec![chunk]), message);
    }
    // Also when another kind is open in the lane.
    let error = expand_err(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "delta": "x"}),
    ]);
    assert_eq!(error, "First TOOL_CALL_CHUNK must have a toolCallName");
}

#[test]
fn conflicting_text_opener_fields_are_fatal() {
    let cases = [
        (
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "user"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant"}),
            "Cannot continue text message 'm1': chunk role 'assistant' does not match the open stream's role 'user'.",
        ),
        (
            // The defaulted role is established too.
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "role": "user"}),
            "Cannot continue text message 'm1': chunk role 'user' does not match the open stream's role 'assistant'.",
        ),
        (
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "name": "bob"}),
            "Cannot continue text message 'm1': chunk name 'bob' does not match the open stream's name (absent).",
        ),
        (
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "name": "ann"}),
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "name": "bob", "role": "assistant"}),
            "Cannot continue text message 'm1': chunk name 'bob' does not match the open stream's name 'ann'.",
        ),
    ];
    for (opener, continuation, message) in cases {
        assert_eq!(expand_err(vec![opener, continuation]), message);
    }
}

#[test]
fn conflicting_tool_opener_fields_are_fatal() {
    let cases = [
        (
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "search"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallName": "delete"}),
            "Cannot continue tool call 't1': chunk toolCallName 'delete' does not match the open stream's toolCallName 'search'.",
        ),
        (
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "f"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "parentMessageId": "m9"}),
            "Cannot continue tool call 't1': chunk parentMessageId 'm9' does not match the open stream's parentMessageId (absent).",
        ),
        (
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "f", "parentMessageId": "m1"}),
            json!({"type": "TOOL_CALL_CHUNK", "toolCallName": "f", "parentMessageId": "m2"}),
            "Cannot continue tool call 't1': chunk parentMessageId 'm2' does not match the open stream's parentMessageId 'm1'.",
        ),
    ];
    for (opener, continuation, message) in cases {
        assert_eq!(expand_err(vec![opener, continuation]), message);
    }
}

#[test]
fn agreeing_repeats_are_accepted() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "name": "ann"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant", "name": "ann", "delta": "x"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "f", "parentMessageId": "m1"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallName": "f", "parentMessageId": "m1", "delta": "{}"}),
    ]);
    assert_eq!(
        types(&out),
        [
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS"
        ]
    );
}

#[test]
fn opener_fields_on_a_new_id_open_rather_than_conflict() {
    let out = expand_ok(vec![
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "user"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "role": "assistant"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "user"}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"}),
        ]
    );
}

#[test]
fn a_rejected_chunk_emits_nothing_and_changes_nothing() {
    let mut expander = ChunkExpander::new();
    let mut out = Vec::new();
    expander
        .push(
            event(json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"})),
            &mut out,
        )
        .expect("opens");
    let before = out.len();
    for bad in [
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t1"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "delta": "x"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "role": "user", "delta": "x"}),
    ] {
        let error = expander.push(event(bad), &mut out);
        assert!(error.is_err());
        assert_eq!(out.len(), before);
    }
    expander
        .push(
            event(json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "b"})),
            &mut out,
        )
        .expect("the message is still open");
    assert_eq!(
        wire(&out[before]),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"})
    );
}

#[test]
fn chunk_error_displays_its_message() {
    let error = ChunkError::new("x y".to_owned());
    assert_eq!(error.to_string(), "x y");
    let error: crate::Error = error.into();
    assert_eq!(error.to_string(), "x y");
}
