//! One test (or a few) per row of the apply table: what each event does to the
//! messages and the state, checked against what the reference client
//! (`@ag-ui/client` 1.0.0) produces for the same events.

use agwire_core::apply::{Applied, RunEnd, Session};
use agwire_core::{Event, Interrupt, Message, RunFinishedOutcome, WarningKind};
use serde_json::{Value, json};

fn event(value: Value) -> Event {
    let text = value.to_string();
    match Event::from_value(value) {
        Ok(decoded) => decoded.value,
        Err(error) => panic!("{text} does not decode: {error}"),
    }
}

fn session(messages: Value) -> Session {
    let messages: Vec<Message> = match serde_json::from_value(messages) {
        Ok(messages) => messages,
        Err(error) => panic!("messages do not decode: {error}"),
    };
    Session::new(messages, json!({}))
}

/// Applies each event; returns every warning text.
fn apply(session: &mut Session, events: &[Value]) -> Vec<String> {
    events
        .iter()
        .flat_map(|e| session.apply(&event(e.clone())).warnings)
        .map(|w| w.message)
        .collect()
}

fn messages(session: &Session) -> Value {
    match serde_json::to_value(&session.messages) {
        Ok(value) => value,
        Err(error) => panic!("{error}"),
    }
}

fn run_started() -> Value {
    json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
}

fn run_finished() -> Value {
    json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
}

// ---------------------------------------------------------------- text

#[test]
fn text_start_creates_an_assistant_message_by_default() {
    let mut s = session(json!([]));
    let warnings = apply(
        &mut s,
        &[
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "name": "bot", "subagentRunId": "sub"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hel"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "lo"}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
        ],
    );
    assert!(warnings.is_empty());
    assert_eq!(
        messages(&s),
        json!([{"id": "m", "role": "assistant", "content": "Hello", "name": "bot", "subagentRunId": "sub"}])
    );
}

#[test]
fn text_start_honours_each_role() {
    let mut s = session(json!([]));
    for (id, role) in [("d", "developer"), ("s", "system"), ("u", "user")] {
        apply(
            &mut s,
            &[
                json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": role}),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": "x"}),
            ],
        );
    }
    assert_eq!(
        messages(&s),
        json!([
            {"id": "d", "role": "developer", "content": "x"},
            {"id": "s", "role": "system", "content": "x"},
            {"id": "u", "role": "user", "content": "x"},
        ])
    );
}

#[test]
fn text_start_reuses_an_existing_message_whatever_its_role() {
    // A tool call created the parent; the text then streams into it.
    let mut s = session(json!([{"id": "u", "role": "user", "content": "hi"}]));
    let warnings = apply(
        &mut s,
        &[
            json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f", "parentMessageId": "p"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "tc"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "p", "role": "user", "metadata": {"k": 1}}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "p", "delta": "calling"}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "p"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "u", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "u", "delta": " again"}),
        ],
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        messages(&s),
        json!([
            {"id": "u", "role": "user", "content": "hi again"},
            {"id": "p", "role": "assistant", "content": "calling", "metadata": {"k": 1},
             "toolCalls": [{"id": "tc", "type": "function", "function": {"name": "f", "arguments": ""}}]},
        ])
    );
}

#[test]
fn text_start_on_an_existing_message_changes_nothing_without_metadata() {
    let mut s = session(json!([{"id": "m", "role": "assistant", "content": "a"}]));
    let applied = s.apply(&event(
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m"}),
    ));
    assert_eq!(applied, Applied::default());
    let applied = s.apply(&event(
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {}}),
    ));
    assert!(applied.messages_changed);
    // An empty metadata object still creates one, as in the reference client.
    assert_eq!(
        messages(&s),
        json!([{"id": "m", "role": "assistant", "content": "a", "metadata": {}}])
    );
}

#[test]
fn text_events_never_write_into_an_activity_message() {
    let mut s =
        session(json!([{"id": "a", "role": "activity", "activityType": "T", "content": {"x": 1}}]));
    let before = messages(&s);
    let warnings = apply(
        &mut s,
        &[
            json!({"type": "TEXT_MESSAGE_START", "messageId": "a", "metadata": {"k": 1}}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "x"}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "a"}),
        ],
    );
    assert_eq!(messages(&s), before);
    let clash =
        "is an activity message — message ids must be unique across activity and text messages";
    assert_eq!(
        warnings,
        vec![
            format!("TEXT_MESSAGE_START: Message 'a' {clash}"),
            format!("TEXT_MESSAGE_CONTENT: Message 'a' {clash}"),
            format!("TEXT_MESSAGE_END: Message 'a' {clash}"),
        ]
    );
}

#[test]
fn text_content_and_end_for_an_unknown_message_warn() {
    let mut s = session(json!([]));
    let content = s.apply(&event(
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "x", "delta": "d"}),
    ));
    assert_eq!(
        content.warnings[0].message,
        "TEXT_MESSAGE_CONTENT: No message found with ID 'x'"
    );
    assert_eq!(content.warnings[0].kind, WarningKind::MissingTarget);
    assert!(!content.messages_changed);
    let end = s.apply(&event(
        json!({"type": "TEXT_MESSAGE_END", "messageId": "x"}),
    ));
    assert_eq!(
        end.warnings[0].message,
        "TEXT_MESSAGE_END: No message found with ID 'x'"
    );
    assert!(s.messages.is_empty());
}

#[test]
fn text_content_replaces_non_string_content() {
    let mut s = session(json!([
        {"id": "u", "role": "user", "content": [{"type": "text", "text": "part"}]},
        {"id": "a", "role": "assistant"},
        {"id": "t", "role": "tool", "toolCallId": "c", "content": [{"type": "text", "text": "r"}]},
    ]));
    apply(
        &mut s,
        &[
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "u", "delta": "text"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "text"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "t", "delta": "text"}),
        ],
    );
    assert_eq!(
        messages(&s),
        json!([
            {"id": "u", "role": "user", "content": "text"},
            {"id": "a", "role": "assistant", "content": "text"},
            {"id": "t", "role": "tool", "toolCallId": "c", "content": "text"},
        ])
    );
}

#[test]
fn text_metadata_merges_on_every_event_last_write_wins() {
    let mut s = session(json!([]));
    apply(
        &mut s,
        &[
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": {"a": 1, "n": {"x": 1}}}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "", "metadata": {"a": 2, "n": {"y": 2}}}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"usage": null}}),
        ],
    );
    assert_eq!(
        s.messages[0].metadata(),
        json!({"a": 2, "n": {"y": 2}, "usage": null}).as_object()
    );
}

// ---------------------------------------------------------------- tool calls

fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

#[test]
fn tool_call_without_parent_mints_an_assistant_message_named_after_it() {
    let mut s = session(json!([]));
    let warnings = apply(
        &mut s,
        &[
            json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "search", "subagentRunId": "sub"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "{\"q\":"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "1}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "tc"}),
        ],
    );
    assert!(warnings.is_empty());
    assert_eq!(
        messages(&s),
        json!([{"id": "tc", "role": "assistant", "subagentRunId": "sub", "toolCalls": [call("tc", "search", "{\"q\":1}")]}])
    );
}

#[test]
fn tool_call_parent_rules() {
    let mut s = session(json!([
        {"id": "asst", "role": "assistant", "content": "hi"},
        {"id": "user", "role": "user", "content": "q"},
    ]));
    let warnings = apply(
        &mut s,
        &[
            // An existing assistant parent carries the call.
            json!({"type": "TOOL_CALL_START", "toolCallId": "a", "toolCallName": "f", "parentMessageId": "asst"}),
            // An unknown parent is created under its own id.
            json!({"type": "TOOL_CALL_START", "toolCallId": "b", "toolCallName": "f", "parentMessageId": "new"}),
            // A parent that is not an assistant: a new message named after the call.
            json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "parentMessageId": "user"}),
            // An empty parent id is no parent.
            json!({"type": "TOOL_CALL_START", "toolCallId": "d", "toolCallName": "f", "parentMessageId": ""}),
        ],
    );
    assert_eq!(
        warnings,
        vec![
            "TOOL_CALL_START: parentMessageId 'user' matches a 'user' message, not assistant — falling back to toolCallId"
        ]
    );
    assert_eq!(
        messages(&s),
        json!([
            {"id": "asst", "role": "assistant", "content": "hi", "toolCalls": [call("a", "f", "")]},
            {"id": "user", "role": "user", "content": "q"},
            {"id": "new", "role": "assistant", "toolCalls": [call("b", "f", "")]},
            {"id": "c", "role": "assistant", "toolCalls": [call("c", "f", "")]},
            {"id": "d", "role": "assistant", "toolCalls": [call("d", "f", "")]},
        ])
    );
}

#[test]
fn tool_call_parent_takes_attribution_only_when_created() {
    let mut s = session(json!([{"id": "tc", "role": "user", "content": "q"}]));
    apply(
        &mut s,
        &[
            json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f", "subagentRunId": "sub"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "x", "toolCallName": "f", "parentMessageId": "p", "subagentRunId": "sub"}),
        ],
    );
    // The first parent's id was already taken, so it is not "created" and stays unattributed.
    assert_eq!(
        messages(&s),
        json!([
            {"id": "tc", "role": "user", "content": "q"},
            {"id": "tc", "role": "assistant", "toolCalls": [call("tc", "f", "")]},
            {"id": "p", "role": "assistant", "subagentRunId": "sub", "toolCalls": [call("x", "f", "")]},
        ])
    );
}

#[test]
fn tool_call_start_is_idempotent() {
    let mut s = session(json!([
        {"id": "p", "role": "assistant", "toolCalls": [call("tc", "f", "{\"a\":1}")]},
    ]));
    let replay = s.apply(&event(
        json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f", "parentMessageId": "other"}),
    ));
    assert_eq!(replay, Applied::default());
    let renamed = s.apply(&event(
        json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "g", "metadata": {"k": 1}}),
    ));
    assert!(renamed.messages_changed);
    assert_eq!(
        renamed.warnings[0].message,
        "TOOL_CALL_START: tool call 'tc' already exists with name 'f' — updating it to 'g'"
    );
    let mut expected = call("tc", "g", "{\"a\":1}");
    expected["metadata"] = json!({"k": 1});
    assert_eq!(
        messages(&s),
        json!([{"id": "p", "role": "assistant", "toolCalls": [expected]}])
    );
}

#[test]
fn tool_call_metadata_lands_on_the_call() {
    let mut s = session(json!([]));
    apply(
        &mut s,
        &[
            json!({"type": "TEXT_MESSAGE_START", "messageId": "p", "metadata": {"msg": 1}}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "p"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "a", "toolCallName": "f", "parentMessageId": "p", "metadata": {"s": 1}}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "a", "delta": "{}", "metadata": {"s": 2, "args": true}}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "a", "metadata": {"end": true}}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "b", "toolCallName": "f", "parentMessageId": "p"}),
        ],
    );
    let mut a = call("a", "f", "{}");
    a["metadata"] = json!({"s": 2, "args": true, "end": true});
    assert_eq!(
        messages(&s),
        json!([{"id": "p", "role": "assistant", "content": "", "metadata": {"msg": 1}, "toolCalls": [a, call("b", "f", "")]}])
    );
}

#[test]
fn tool_call_args_and_end_for_an_unknown_call_warn() {
    let mut s = session(json!([]));
    let warnings = apply(
        &mut s,
        &[
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "x", "delta": "{}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "x"}),
        ],
    );
    assert_eq!(
        warnings,
        vec![
            "TOOL_CALL_ARGS: No message found containing tool call with ID 'x'",
            "TOOL_CALL_END: No message found containing tool call with ID 'x'",
        ]
    );
    assert!(s.messages.is_empty());
}

#[test]
fn tool_result_goes_after_its_assistant_and_the_results_already_there() {
    let mut s = session(json!([]));
    apply(
        &mut s,
        &[
            json!({"type": "TOOL_CALL_START", "toolCallId": "a", "toolCallName": "f", "parentMessageId": "p"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "a"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "b", "toolCallName": "f", "parentMessageId": "p"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "b"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "later"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "later", "delta": "meanwhile"}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "later"}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "ra", "toolCallId": "a", "content": "A", "metadata": {"ms": 3}}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "rb", "toolCallId": "b", "content": [{"type": "text", "text": "B"}], "subagentRunId": "sub"}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "orphan", "toolCallId": "zzz", "content": "?"}),
            // The tail grows after an insertion in the middle: lookups must follow.
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "later", "delta": "!"}),
        ],
    );
    let ids: Vec<&str> = s.messages.iter().map(Message::id).collect();
    assert_eq!(ids, ["p", "ra", "rb", "later", "orphan"]);
    let all = messages(&s);
    assert_eq!(
        all[1],
        json!({"id": "ra", "role": "tool", "toolCallId": "a", "content": "A", "metadata": {"ms": 3}})
    );
    assert_eq!(
        all[2],
        json!({"id": "rb", "role": "tool", "toolCallId": "b", "content": [{"type": "text", "text": "B"}], "subagentRunId": "sub"})
    );
    assert_eq!(all[3]["content"], "meanwhile!");
}

// ---------------------------------------------------------------- state

#[test]
fn state_snapshot_takes_any_json() {
    let mut s = session(json!([]));
    for snapshot in [
        json!(null),
        json!(0),
        json!(["only-this"]),
        json!("x"),
        json!({"a": 1}),
    ] {
        let applied = s.apply(&event(
            json!({"type": "STATE_SNAPSHOT", "snapshot": snapshot}),
        ));
        assert!(applied.state_changed);
        assert_eq!(s.state, snapshot);
    }
}

#[test]
fn state_delta_applies_atomically() {
    let mut s = Session::new(Vec::new(), json!({"count": 1, "list": [1]}));
    let ok = s.apply(&event(json!({"type": "STATE_DELTA", "delta": [
        {"op": "replace", "path": "/count", "value": 2},
        {"op": "add", "path": "/list/-", "value": 2},
    ]})));
    assert!(ok.state_changed && ok.warnings.is_empty());
    assert_eq!(s.state, json!({"count": 2, "list": [1, 2]}));

    let failed = s.apply(&event(json!({"type": "STATE_DELTA", "delta": [
        {"op": "replace", "path": "/count", "value": 3},
        {"op": "remove", "path": "/missing"},
    ]})));
    assert!(!failed.state_changed);
    assert_eq!(failed.warnings.len(), 1);
    assert_eq!(failed.warnings[0].kind, WarningKind::StatePatchFailed);
    let text = &failed.warnings[0].message;
    assert!(
        text.starts_with("Failed to apply state patch:\nCurrent state: {\n  \"count\": 2,"),
        "{text}"
    );
    assert!(text.contains("\nError: Cannot perform the operation at a path that does not exist\nname: OPERATION_PATH_UNRESOLVABLE\nindex: 0"), "{text}");
    assert_eq!(s.state, json!({"count": 2, "list": [1, 2]}));
}

#[test]
fn state_delta_that_would_crash_the_json_patch_crate_is_applied_like_the_reference() {
    // json-patch 5.0.0 panics undoing this: the failing move removed its source first.
    let mut s = Session::new(Vec::new(), json!({"a": {"b": 1}, "c": [1, 2]}));
    let applied = s.apply(&event(json!({"type": "STATE_DELTA", "delta": [
        {"op": "add", "path": "/c/0", "value": {}},
        {"op": "move", "from": "/c", "path": "/x/0/b"},
    ]})));
    assert_eq!(applied.warnings.len(), 1);
    assert_eq!(s.state, json!({"a": {"b": 1}, "c": [1, 2]}));
}

/// Runs one patch against `state` and returns the state afterwards (and
/// whether it applied).
fn patched(state: Value, delta: &Value) -> (Value, bool) {
    let mut s = Session::new(Vec::new(), state);
    let applied = s.apply(&event(json!({"type": "STATE_DELTA", "delta": delta})));
    (s.state, applied.warnings.is_empty())
}

#[test]
fn state_delta_follows_fast_json_patch_where_it_departs_from_rfc_6902() {
    // Each expectation is what @ag-ui/client 1.0.0 (fast-json-patch 3.1.1) produces.
    let cases = [
        // Removing the root leaves null.
        (
            json!({"a": 1}),
            json!([{"op": "remove", "path": ""}]),
            json!(null),
            true,
        ),
        // Writing a property of a primitive root is silently ignored.
        (
            json!(5),
            json!([{"op": "add", "path": "/a", "value": 1}]),
            json!(5),
            true,
        ),
        (
            json!(0),
            json!([{"op": "replace", "path": "/a", "value": 1}, {"op": "replace", "path": "", "value": [1]}]),
            json!([1]),
            true,
        ),
        // A leading zero is an index when adding.
        (
            json!([1, 2, 3]),
            json!([{"op": "add", "path": "/01", "value": 9}]),
            json!([1, 9, 2, 3]),
            true,
        ),
        (
            json!([1, 2, 3]),
            json!([{"op": "replace", "path": "/01", "value": 9}]),
            json!([1, 2, 3]),
            false,
        ),
        // move/copy onto an index past the end append.
        (
            json!({"l": [1], "v": 7}),
            json!([{"op": "copy", "from": "/v", "path": "/l/5"}]),
            json!({"l": [1, 7], "v": 7}),
            true,
        ),
        // Numbers compare by value.
        (
            json!({"n": 1}),
            json!([{"op": "test", "path": "/n", "value": 1.0}]),
            json!({"n": 1}),
            true,
        ),
        // Inherited names exist for lookups: replace creates, remove is a no-op.
        (
            json!({}),
            json!([{"op": "replace", "path": "/toString", "value": 1}]),
            json!({"toString": 1}),
            true,
        ),
        (
            json!({}),
            json!([{"op": "remove", "path": "/constructor"}]),
            json!({}),
            true,
        ),
        // __proto__ is refused.
        (
            json!({}),
            json!([{"op": "add", "path": "/__proto__", "value": {}}]),
            json!({}),
            false,
        ),
        // A move from an array's `length` passes validation and then takes the
        // first element (`splice("length", 1)`).
        (
            json!({"l": ["x", "y"]}),
            json!([{"op": "move", "from": "/l/length", "path": "/m"}]),
            json!({"l": ["y"], "m": "x"}),
            true,
        ),
        (
            json!({"l": ["x", "y"]}),
            json!([{"op": "move", "from": "/l/k", "path": "/m"}]),
            json!({"l": ["x", "y"]}),
            false,
        ),
        // Test on a missing member fails; so does an add under a missing parent.
        (
            json!({}),
            json!([{"op": "test", "path": "/a", "value": null}]),
            json!({}),
            false,
        ),
        (
            json!({}),
            json!([{"op": "add", "path": "/a/b", "value": 1}]),
            json!({}),
            false,
        ),
        // Add at an array index past the end is out of bounds.
        (
            json!([]),
            json!([{"op": "add", "path": "/1", "value": 1}]),
            json!([]),
            false,
        ),
    ];
    for (state, delta, expected, ok) in cases {
        let (got, applied) = patched(state.clone(), &delta);
        assert_eq!((&got, applied), (&expected, ok), "{state} + {delta}");
    }
}

#[test]
fn state_left_undefined_by_a_patch_is_kept_and_the_next_patch_starts_from_null() {
    let mut s = Session::new(Vec::new(), json!({"a": 1}));
    // A root copy from a missing path leaves the reference client holding `undefined`.
    let undefined = s.apply(&event(
        json!({"type": "STATE_DELTA", "delta": [{"op": "copy", "from": "/missing", "path": ""}]}),
    ));
    assert_eq!(undefined, Applied::default());
    assert_eq!(s.state, json!({"a": 1}));
    // An empty patch of `null` is `null`.
    let next = s.apply(&event(json!({"type": "STATE_DELTA", "delta": []})));
    assert!(next.state_changed);
    assert_eq!(s.state, json!(null));
}

// ---------------------------------------------------------------- messages snapshot

#[test]
fn messages_snapshot_reconciles_by_id_in_place() {
    let mut s = session(json!([
        {"id": "a", "role": "user", "content": "a"},
        {"id": "b", "role": "assistant", "content": "b"},
        {"id": "c", "role": "user", "content": "c"},
    ]));
    let applied = s.apply(&event(json!({"type": "MESSAGES_SNAPSHOT", "messages": [
        {"id": "new1", "role": "user", "content": "n1"},
        {"id": "c", "role": "user", "content": "c2"},
        {"id": "a", "role": "user", "content": "a2"},
        {"id": "new2", "role": "user", "content": "n2"},
    ]})));
    assert!(applied.messages_changed);
    let ids: Vec<&str> = s.messages.iter().map(Message::id).collect();
    assert_eq!(ids, ["a", "c", "new1", "new2"]);
    assert_eq!(messages(&s)[0]["content"], "a2");
    assert_eq!(messages(&s)[1]["content"], "c2");
}

fn activity(id: &str, kind: &str) -> Value {
    json!({"id": id, "role": "activity", "activityType": kind, "content": {}})
}

fn reasoning(id: &str) -> Value {
    json!({"id": id, "role": "reasoning", "content": "thinking"})
}

fn ids_after_snapshot(existing: Value, snapshot: Value) -> Vec<String> {
    let mut s = session(existing);
    s.apply(&event(snapshot));
    s.messages.iter().map(|m| m.id().to_owned()).collect()
}

#[test]
fn messages_snapshot_keeps_client_only_activity_and_reasoning() {
    let existing =
        json!([activity("act", "A"), reasoning("r"), {"id": "u", "role": "user", "content": "q"}]);
    // No activity and no reasoning in the snapshot: both survive omission.
    let kept = ids_after_snapshot(
        existing.clone(),
        json!({"type": "MESSAGES_SNAPSHOT", "messages": []}),
    );
    assert_eq!(kept, ["act", "r"]);
    // A snapshot carrying activity / reasoning owns that kind.
    let owned = ids_after_snapshot(
        existing,
        json!({"type": "MESSAGES_SNAPSHOT", "messages": [activity("other", "B"), reasoning("r2")]}),
    );
    assert_eq!(owned, ["other", "r2"]);
}

#[test]
fn messages_snapshot_honours_declared_activity_authority() {
    let existing = json!([activity("a", "A"), activity("b", "B")]);
    let with = |declaration: Value, carried: Value| {
        ids_after_snapshot(
            existing.clone(),
            json!({"type": "MESSAGES_SNAPSHOT", "messages": carried, "metadata": {"@ag-ui/client": declaration}}),
        )
    };
    // null: owns every type, even carrying no activity.
    assert_eq!(
        with(json!({"authoritativeActivityTypes": null}), json!([])),
        Vec::<String>::new()
    );
    // A list owns its types only, even when the snapshot carries others.
    assert_eq!(
        with(
            json!({"authoritativeActivityTypes": ["A"]}),
            json!([activity("c", "C")])
        ),
        ["b", "c"]
    );
    // An unreadable declaration owns nothing.
    assert_eq!(with(json!(5), json!([activity("c", "C")])), ["a", "b", "c"]);
    assert_eq!(
        with(
            json!({"authoritativeActivityTypes": [1]}),
            json!([activity("c", "C")])
        ),
        ["a", "b", "c"]
    );
    // A declaration object without the key falls back to inference.
    assert_eq!(with(json!({}), json!([activity("c", "C")])), ["c"]);
    // A matching id always updates, whatever the authority.
    let mut s = session(existing.clone());
    s.apply(&event(json!({"type": "MESSAGES_SNAPSHOT", "metadata": {"@ag-ui/client": {"authoritativeActivityTypes": []}},
        "messages": [{"id": "a", "role": "activity", "activityType": "A", "content": {"v": 2}}]})));
    assert_eq!(messages(&s)[0]["content"], json!({"v": 2}));
}

#[test]
fn messages_snapshot_with_repeated_ids_behaves_like_the_reference() {
    // The snapshot's last copy of an id replaces every message with that id,
    // and those places then hold one object: an edit through the first shows
    // in all of them.
    let mut s = session(json!([
        {"id": "m", "role": "user", "content": "1"},
        {"id": "x", "role": "user", "content": "x"},
        {"id": "m", "role": "user", "content": "2"},
    ]));
    apply(
        &mut s,
        &[
            json!({"type": "MESSAGES_SNAPSHOT", "messages": [
                {"id": "m", "role": "assistant", "content": "first"},
                {"id": "x", "role": "user", "content": "x"},
                {"id": "m", "role": "assistant", "content": "last"},
                {"id": "n", "role": "user", "content": "n1"},
                {"id": "n", "role": "user", "content": "n2"},
            ]}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "!"}),
            json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "m", "encryptedValue": "e"}),
        ],
    );
    let all = messages(&s);
    assert_eq!(
        all[0],
        json!({"id": "m", "role": "assistant", "content": "last!", "encryptedValue": "e"})
    );
    assert_eq!(all[2], all[0]);
    // New ids are appended once per snapshot entry.
    assert_eq!(all[3]["content"], "n1");
    assert_eq!(all[4]["content"], "n2");
    // Replacing the first place ends the sharing.
    s.apply(&event(
        json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "T", "content": {}}),
    ));
    s.apply(&event(
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "n", "delta": "?"}),
    ));
    assert_eq!(messages(&s)[2]["content"], "last!");
}

// ---------------------------------------------------------------- activity

#[test]
fn activity_snapshot_creates_replaces_and_preserves() {
    let mut s = session(json!([]));
    apply(
        &mut s,
        &[
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "search", "content": {"q": 1}, "metadata": {"m": 1}, "subagentRunId": "sub"}),
            // replace defaults to true: new type, content and attribution; metadata kept.
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "plan", "content": {"step": 1}, "metadata": {"n": 2}}),
        ],
    );
    assert_eq!(
        messages(&s),
        json!([{"id": "a", "role": "activity", "activityType": "plan", "content": {"step": 1}, "metadata": {"m": 1, "n": 2}}])
    );
    // replace: false leaves type and content, but merges metadata.
    let applied = s.apply(&event(
        json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "other",
        "content": {"x": 0}, "replace": false, "metadata": {"o": 3}}),
    ));
    assert!(applied.messages_changed);
    assert_eq!(
        messages(&s),
        json!([{"id": "a", "role": "activity", "activityType": "plan", "content": {"step": 1}, "metadata": {"m": 1, "n": 2, "o": 3}}])
    );
}

#[test]
fn activity_snapshot_over_another_kind_of_message() {
    let mut s = session(json!([
        {"id": "u", "role": "user", "content": "q"},
        {"id": "p", "role": "assistant", "toolCalls": [call("tc", "f", "")]},
    ]));
    apply(
        &mut s,
        &[
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "u", "activityType": "T", "content": {}, "replace": false, "metadata": {"k": 1}}),
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "p", "activityType": "T", "content": {"v": 1}}),
        ],
    );
    assert_eq!(
        messages(&s),
        json!([
            {"id": "u", "role": "user", "content": "q"},
            {"id": "p", "role": "activity", "activityType": "T", "content": {"v": 1}},
        ])
    );
    // The replaced message's tool call is gone with it.
    let gone = s.apply(&event(
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "x"}),
    ));
    assert_eq!(gone.warnings.len(), 1);
}

#[test]
fn activity_delta_patches_content_and_type() {
    let mut s = session(
        json!([{"id": "a", "role": "activity", "activityType": "search", "content": {"found": 1, "list": []}}]),
    );
    let applied = s.apply(&event(json!({"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "search-done",
        "patch": [{"op": "replace", "path": "/found", "value": 3}, {"op": "add", "path": "/list/-", "value": "x"}],
        "metadata": {"k": 1}})));
    assert!(applied.messages_changed && applied.warnings.is_empty());
    assert_eq!(
        messages(&s),
        json!([{"id": "a", "role": "activity", "activityType": "search-done", "content": {"found": 3, "list": ["x"]}, "metadata": {"k": 1}}])
    );
}

#[test]
fn activity_delta_failures() {
    let mut s = session(json!([
        {"id": "a", "role": "activity", "activityType": "T", "content": {"n": 1}},
        {"id": "u", "role": "user", "content": "q"},
    ]));
    let warnings = apply(
        &mut s,
        &[
            // A patch that fails keeps content and type, but not the metadata out.
            json!({"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "U", "metadata": {"k": 1},
                "patch": [{"op": "replace", "path": "/n", "value": 2}, {"op": "remove", "path": "/missing"}]}),
            json!({"type": "ACTIVITY_DELTA", "messageId": "u", "activityType": "U", "patch": []}),
            json!({"type": "ACTIVITY_DELTA", "messageId": "nope", "activityType": "U", "patch": []}),
        ],
    );
    assert!(warnings[0].starts_with("Failed to apply activity patch for 'a': Cannot perform the operation at a path that does not exist"), "{}", warnings[0]);
    assert_eq!(
        warnings[1],
        "ACTIVITY_DELTA: Message 'u' is not an activity message"
    );
    assert_eq!(
        warnings[2],
        "ACTIVITY_DELTA: No activity message found with ID 'nope'"
    );
    assert_eq!(
        messages(&s),
        json!([
            {"id": "a", "role": "activity", "activityType": "T", "content": {"n": 1}, "metadata": {"k": 1}},
            {"id": "u", "role": "user", "content": "q"},
        ])
    );
}

#[test]
fn activity_delta_that_leaves_no_object_empties_the_content() {
    let mut s =
        session(json!([{"id": "a", "role": "activity", "activityType": "T", "content": {"n": 1}}]));
    let applied = s.apply(&event(
        json!({"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "U",
        "patch": [{"op": "remove", "path": ""}]}),
    ));
    assert_eq!(applied.warnings.len(), 1);
    assert_eq!(
        messages(&s),
        json!([{"id": "a", "role": "activity", "activityType": "U", "content": {}}])
    );
}

// ---------------------------------------------------------------- runs

#[test]
fn run_started_adds_unknown_input_messages() {
    let mut s = session(json!([{"id": "a", "role": "user", "content": "kept"}]));
    let applied = s.apply(&event(
        json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "input": {
        "threadId": "t", "runId": "r", "tools": [], "context": [],
        "messages": [
            {"id": "a", "role": "user", "content": "ignored"},
            {"id": "b", "role": "user", "content": "added"},
            {"id": "b", "role": "user", "content": "ignored too"},
        ]}}),
    ));
    assert!(applied.messages_changed);
    assert_eq!(
        messages(&s),
        json!([{"id": "a", "role": "user", "content": "kept"}, {"id": "b", "role": "user", "content": "added"}])
    );
    assert_eq!(
        (s.thread_id.as_deref(), s.run_id.as_deref()),
        (Some("t"), Some("r"))
    );
    assert_eq!(s.apply(&event(run_started())), Applied::default());
}

#[test]
fn run_finished_records_result_interrupts_and_pending_calls() {
    let mut s = session(json!([]));
    apply(
        &mut s,
        &[
            run_started(),
            json!({"type": "TOOL_CALL_START", "toolCallId": "a", "toolCallName": "f"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "a"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "b", "toolCallName": "f"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "b"}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "a", "content": "ok"}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": {"answer": 42}}),
        ],
    );
    assert_eq!(s.result, Some(json!({"answer": 42})));
    // Derived from the stream: started and not answered.
    assert_eq!(s.pending_tool_call_ids, ["b"]);
    assert!(matches!(
        &s.last_run,
        Some(RunEnd::Finished {
            outcome: RunFinishedOutcome::Success { .. },
            ..
        })
    ));

    // An interrupted run leaves the result alone and records its interrupts.
    apply(
        &mut s,
        &[
            run_started(),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "interrupt",
                "interrupts": [{"id": "i1", "reason": "confirmation"}]}}),
        ],
    );
    assert_eq!(s.result, Some(json!({"answer": 42})));
    assert_eq!(s.pending_interrupts, [Interrupt::new("i1", "confirmation")]);
    assert!(s.pending_tool_call_ids.is_empty());

    // A later success clears them; without a result it resets the result; named pending calls win.
    apply(
        &mut s,
        &[
            run_started(),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c"}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success", "pendingToolCallIds": ["z"]}}),
        ],
    );
    assert!(s.pending_interrupts.is_empty());
    assert_eq!(s.result, None);
    assert_eq!(s.pending_tool_call_ids, ["z"]);

    // Cancelled: nothing pending, result untouched.
    s.result = Some(json!(1));
    apply(
        &mut s,
        &[
            run_started(),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "cancelled"}}),
        ],
    );
    assert_eq!(s.result, Some(json!(1)));
    assert!(matches!(
        &s.last_run,
        Some(RunEnd::Finished {
            outcome: RunFinishedOutcome::Cancelled,
            ..
        })
    ));
}

#[test]
fn run_tally_is_per_run() {
    let mut s = session(json!([]));
    apply(
        &mut s,
        &[
            run_started(),
            json!({"type": "TOOL_CALL_START", "toolCallId": "a", "toolCallName": "f"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "a"}),
            run_finished(),
            run_started(),
            run_finished(),
        ],
    );
    assert!(s.pending_tool_call_ids.is_empty());
}

#[test]
fn run_error_is_recorded_and_cleared_by_the_next_run() {
    let mut s = session(json!([]));
    apply(
        &mut s,
        &[
            run_started(),
            json!({"type": "RUN_ERROR", "message": "boom", "code": "E"}),
        ],
    );
    assert_eq!(
        s.last_run,
        Some(RunEnd::Errored {
            message: "boom".into(),
            code: Some("E".into()),
            usage: None
        })
    );
    apply(&mut s, &[run_started()]);
    assert_eq!(s.last_run, None);
}

// ---------------------------------------------------------------- reasoning

#[test]
fn reasoning_messages_stream_like_text() {
    let mut s = session(json!([]));
    let warnings = apply(
        &mut s,
        &[
            json!({"type": "REASONING_START", "messageId": "span", "metadata": {"span": true}}),
            json!({"type": "REASONING_MESSAGE_START", "messageId": "r", "role": "reasoning", "subagentRunId": "sub", "metadata": {"a": 1}}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": "hmm"}),
            json!({"type": "REASONING_MESSAGE_END", "messageId": "r", "metadata": {"b": 2}}),
            json!({"type": "REASONING_END", "messageId": "span"}),
        ],
    );
    assert!(warnings.is_empty());
    assert_eq!(
        messages(&s),
        json!([{"id": "r", "role": "reasoning", "content": "hmm", "metadata": {"a": 1, "b": 2}, "subagentRunId": "sub"}])
    );
}

#[test]
fn reasoning_warnings() {
    let mut s = session(json!([activity("a", "T")]));
    let warnings = apply(
        &mut s,
        &[
            json!({"type": "REASONING_MESSAGE_START", "messageId": "a", "role": "reasoning"}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "x", "delta": "d"}),
            json!({"type": "REASONING_MESSAGE_END", "messageId": "x"}),
        ],
    );
    assert_eq!(
        warnings,
        vec![
            "REASONING_MESSAGE_START: Message 'a' is an activity message — message ids must be unique across activity and reasoning messages",
            "REASONING_MESSAGE_CONTENT: No message found with ID 'x'",
            "REASONING_MESSAGE_END: No message found with ID 'x'",
        ]
    );
}

#[test]
fn encrypted_values_land_on_the_named_entity() {
    let mut s = session(json!([
        {"id": "p", "role": "assistant", "toolCalls": [call("tc", "f", "")]},
        {"id": "r", "role": "reasoning", "content": "", "encryptedValueType": "old"},
        activity("a", "T"),
    ]));
    let warnings = apply(
        &mut s,
        &[
            json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "tool-call", "entityId": "tc", "encryptedValue": "E1", "encryptedValueType": "anthropic", "metadata": {"no": 1}}),
            // 1.1: an event without a type removes the stored one.
            json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "r", "encryptedValue": "E2"}),
            json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "a", "encryptedValue": "E3"}),
            json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "nope", "encryptedValue": "E4"}),
            json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "tool-call", "entityId": "nope", "encryptedValue": "E5"}),
        ],
    );
    let mut tc = call("tc", "f", "");
    tc["encryptedValue"] = json!("E1");
    tc["encryptedValueType"] = json!("anthropic");
    assert_eq!(
        messages(&s),
        json!([
            {"id": "p", "role": "assistant", "toolCalls": [tc]},
            {"id": "r", "role": "reasoning", "content": "", "encryptedValue": "E2"},
            activity("a", "T"),
        ])
    );
    assert_eq!(warnings.len(), 3, "{warnings:?}");
}

// ---------------------------------------------------------------- metadata targets

#[test]
fn metadata_of_run_step_state_and_passthrough_events_lands_nowhere() {
    let mut s = session(json!([{"id": "m", "role": "user", "content": "q"}]));
    let md = json!({"k": 1});
    apply(
        &mut s,
        &[
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "metadata": md}),
            json!({"type": "STEP_STARTED", "stepName": "s", "metadata": md}),
            json!({"type": "STATE_SNAPSHOT", "snapshot": {}, "metadata": md}),
            json!({"type": "STATE_DELTA", "delta": [], "metadata": md}),
            json!({"type": "RAW", "event": null, "metadata": md}),
            json!({"type": "CUSTOM", "name": "x", "value": null, "metadata": md}),
            json!({"type": "STEP_FINISHED", "stepName": "s", "metadata": md}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "metadata": md}),
        ],
    );
    assert_eq!(
        messages(&s),
        json!([{"id": "m", "role": "user", "content": "q"}])
    );
}

// ---------------------------------------------------------------- what never applies

#[test]
fn chunks_are_reported_and_unknown_events_ignored() {
    let mut s = session(json!([]));
    let chunk = s.apply(&event(
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "x"}),
    ));
    assert_eq!(
        chunk.warnings[0].message,
        "TEXT_MESSAGE_CHUNK must be transformed before being applied"
    );
    let tool = s.apply(&event(
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "t", "toolCallName": "f"}),
    ));
    assert_eq!(
        tool.warnings[0].message,
        "TOOL_CALL_CHUNK must be transformed before being applied"
    );
    let unknown = s.apply(&event(json!({"type": "FUTURE_EVENT", "x": 1})));
    assert_eq!(unknown, Applied::default());
    assert!(s.messages.is_empty());
}

// ---------------------------------------------------------------- the session itself

#[test]
fn edits_to_the_message_list_between_events_are_noticed() {
    let mut s = session(json!([{"id": "a", "role": "user", "content": "1"}]));
    // Grown.
    s.messages.push(Message::assistant("b", "x"));
    apply(
        &mut s,
        &[json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "b", "delta": "y"})],
    );
    // Replaced wholesale, same length.
    s.messages = vec![Message::assistant("c", ""), Message::user("a", "2")];
    let warnings = apply(
        &mut s,
        &[
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "c", "delta": "z"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "b", "delta": "gone"}),
        ],
    );
    assert_eq!(
        warnings,
        vec!["TEXT_MESSAGE_CONTENT: No message found with ID 'b'"]
    );
    assert_eq!(messages(&s)[0]["content"], "z");
    // Overwritten in place with another id: reindex.
    s.messages[0] = Message::assistant("d", "");
    s.reindex();
    apply(
        &mut s,
        &[json!({"type": "TEXT_MESSAGE_START", "messageId": "d"})],
    );
    assert_eq!(s.messages.len(), 2);
}

#[test]
fn a_long_conversation_streams_without_scanning_it() {
    let history: Vec<Message> = (0..20_000)
        .map(|i| Message::user(format!("m{i}"), "earlier"))
        .collect();
    let mut s = Session::new(history, json!({}));
    let start = std::time::Instant::now();
    s.apply(&event(
        json!({"type": "TEXT_MESSAGE_START", "messageId": "reply"}),
    ));
    s.apply(&event(json!({"type": "TOOL_CALL_START", "toolCallId": "tc", "toolCallName": "f", "parentMessageId": "reply"})));
    let content =
        event(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "reply", "delta": "tok "}));
    let args = event(json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc", "delta": "x"}));
    for _ in 0..50_000 {
        s.apply(&content);
        s.apply(&args);
    }
    // A scan per event would compare a billion ids; the lookup takes milliseconds.
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(s.messages.len(), 20_001);
}

#[test]
fn sessions_compare_by_content() {
    let mut a = session(json!([]));
    apply(
        &mut a,
        &[
            run_started(),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m"}),
        ],
    );
    let b = a.clone();
    assert_eq!(a, b);
    let default = Session::default();
    assert_eq!(default.state, json!({}));
}

#[test]
fn a_failed_patch_restores_the_state_exactly() {
    let original = json!({"a": 1, "b": {"x": [1, 2]}, "c": 3, "l": [0, 1, 2]});
    let mut s = Session::new(Vec::new(), original.clone());
    let applied = s.apply(&event(json!({"type": "STATE_DELTA", "delta": [
        {"op": "remove", "path": "/b"},
        {"op": "replace", "path": "/c", "value": 4},
        {"op": "add", "path": "/d", "value": 5},
        {"op": "move", "from": "/l/0", "path": "/l/-"},
        {"op": "copy", "from": "/a", "path": "/l/1"},
        {"op": "add", "path": "", "value": {"replaced": true}},
        {"op": "test", "path": "/replaced", "value": false},
    ]})));
    assert_eq!(applied.warnings.len(), 1);
    // Same members in the same order, not merely an equal map.
    assert_eq!(s.state.to_string(), original.to_string());
}
