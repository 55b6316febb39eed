use serde_json::{Value, json};

use super::*;
use crate::event::RunStartedEvent;

fn event(value: &Value) -> Event {
    Event::from_value(value.clone())
        .unwrap_or_else(|e| panic!("test event does not decode: {e}: {value}"))
        .value
}

/// Where `verifier` first rejects `events`: `(index, message)`.
fn run_with(mut verifier: Verifier, events: &[Value]) -> Result<(), (usize, String)> {
    for (i, value) in events.iter().enumerate() {
        verifier.verify(&event(value)).map_err(|e| (i, e.message))?;
    }
    Ok(())
}

fn accepts(events: &[Value]) {
    if let Err((i, message)) = run_with(Verifier::new(), events) {
        panic!("event {i} ({}) rejected: {message}", events[i]);
    }
}

/// The message the last event is rejected with; every earlier event must pass.
fn rejects_last_with(verifier: Verifier, events: &[Value]) -> String {
    match run_with(verifier, events) {
        Ok(()) => panic!("stream accepted, expected a rejection of its last event"),
        Err((i, message)) => {
            assert_eq!(
                i,
                events.len() - 1,
                "rejected early, at {}: {message}",
                events[i]
            );
            message
        }
    }
}

fn rejects_last(events: &[Value]) -> String {
    rejects_last_with(Verifier::new(), events)
}

fn tagged(mut event: Value, tag: Option<&str>) -> Value {
    if let Some(tag) = tag {
        event["subagentRunId"] = json!(tag);
    }
    event
}

fn started(run: &str) -> Value {
    json!({"type": "RUN_STARTED", "threadId": "th", "runId": run})
}

fn finished(run: &str) -> Value {
    json!({"type": "RUN_FINISHED", "threadId": "th", "runId": run})
}

fn run_error() -> Value {
    json!({"type": "RUN_ERROR", "message": "failed"})
}

fn text_start(id: &str, tag: Option<&str>) -> Value {
    tagged(json!({"type": "TEXT_MESSAGE_START", "messageId": id}), tag)
}

fn text_content(id: &str, tag: Option<&str>) -> Value {
    tagged(
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": "x"}),
        tag,
    )
}

fn text_end(id: &str, tag: Option<&str>) -> Value {
    tagged(json!({"type": "TEXT_MESSAGE_END", "messageId": id}), tag)
}

fn tool_start(id: &str, parent: Option<&str>, tag: Option<&str>) -> Value {
    let mut event = json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": "f"});
    if let Some(parent) = parent {
        event["parentMessageId"] = json!(parent);
    }
    tagged(event, tag)
}

fn tool_args(id: &str, tag: Option<&str>) -> Value {
    tagged(
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": "{}"}),
        tag,
    )
}

fn tool_end(id: &str, tag: Option<&str>) -> Value {
    tagged(json!({"type": "TOOL_CALL_END", "toolCallId": id}), tag)
}

fn step(started: bool, name: &str, tag: Option<&str>) -> Value {
    let ty = if started {
        "STEP_STARTED"
    } else {
        "STEP_FINISHED"
    };
    tagged(json!({"type": ty, "stepName": name}), tag)
}

fn reasoning(ty: &str, id: &str, tag: Option<&str>) -> Value {
    let mut event = json!({"type": ty, "messageId": id});
    match ty {
        "REASONING_MESSAGE_START" => event["role"] = json!("reasoning"),
        "REASONING_MESSAGE_CONTENT" => event["delta"] = json!("hmm"),
        _ => {}
    }
    tagged(event, tag)
}

fn subagent_started(id: &str, parent: Option<&str>) -> Value {
    let mut event = json!({"type": "SUBAGENT_STARTED", "subagentRunId": id, "name": "helper"});
    if let Some(parent) = parent {
        event["parentSubagentRunId"] = json!(parent);
    }
    event
}

fn subagent_finished(id: &str) -> Value {
    json!({"type": "SUBAGENT_FINISHED", "subagentRunId": id})
}

fn subagent_error(id: &str) -> Value {
    json!({"type": "SUBAGENT_ERROR", "subagentRunId": id, "message": "boom"})
}

fn encrypted(subtype: &str, entity: &str, tag: Option<&str>) -> Value {
    tagged(
        json!({
            "type": "REASONING_ENCRYPTED_VALUE",
            "subtype": subtype,
            "entityId": entity,
            "encryptedValue": "opaque",
        }),
        tag,
    )
}

fn activity_snapshot(id: &str, replace: Option<bool>, tag: Option<&str>) -> Value {
    let mut event = json!({
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": id,
        "activityType": "PLAN",
        "content": {},
    });
    if let Some(replace) = replace {
        event["replace"] = json!(replace);
    }
    tagged(event, tag)
}

fn activity_delta(id: &str, tag: Option<&str>) -> Value {
    tagged(
        json!({"type": "ACTIVITY_DELTA", "messageId": id, "activityType": "PLAN", "patch": []}),
        tag,
    )
}

fn user(id: &str, tag: Option<&str>) -> Value {
    tagged(json!({"id": id, "role": "user", "content": "hi"}), tag)
}

fn snapshot(messages: &Value) -> Value {
    json!({"type": "MESSAGES_SNAPSHOT", "messages": messages})
}

fn mismatch(ty: &str, tag: &str, kind: &str, id: &str, owner: &str) -> String {
    format!(
        "Cannot send '{ty}': subagentRunId '{tag}' does not match the {kind} '{id}' opener's subagent '{owner}'."
    )
}

const PARENT: &str = "(the parent agent)";

// ---- run boundaries ----

#[test]
fn the_first_event_must_start_a_run() {
    assert_eq!(
        rejects_last(&[text_start("m1", None)]),
        "First event must be 'RUN_STARTED'"
    );
    // A chunk reaching the verifier is held to the same rule.
    assert_eq!(
        rejects_last(&[json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"})]),
        "First event must be 'RUN_STARTED'"
    );
    assert_eq!(
        rejects_last(&[finished("r1")]),
        "First event must be 'RUN_STARTED'"
    );
}

#[test]
fn the_struct_api_works_without_json() {
    let mut verifier = Verifier::new();
    let start = Event::RunStarted(RunStartedEvent {
        thread_id: "th".into(),
        run_id: "r1".into(),
        parent_run_id: None,
        protocol_version: None,
        input: None,
        base: Default::default(),
    });
    let content = Event::TextMessageContent(crate::event::TextMessageContentEvent {
        message_id: "m1".into(),
        delta: "x".into(),
        subagent_run_id: None,
        base: Default::default(),
    });
    assert_eq!(verifier.verify(&start), Ok(()));
    assert_eq!(
        verifier.verify(&content).map_err(|e| e.to_string()),
        Err("Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'm1'. Start a text message with 'TEXT_MESSAGE_START' first.".to_owned())
    );
}

#[test]
fn run_error_may_open_the_stream_and_a_run_may_follow() {
    accepts(&[run_error(), started("r1"), finished("r1")]);
    assert_eq!(
        rejects_last(&[run_error(), text_start("m1", None)]),
        "Cannot send event type 'TEXT_MESSAGE_START': The run has already errored with 'RUN_ERROR'. No further events can be sent."
    );
}

#[test]
fn nothing_but_run_started_follows_run_error() {
    let errored = [started("r1"), text_start("m1", None), run_error()];
    for (next, ty) in [
        (text_content("m1", None), "TEXT_MESSAGE_CONTENT"),
        (finished("r1"), "RUN_FINISHED"),
        (run_error(), "RUN_ERROR"),
        (json!({"type": "CUSTOM", "name": "n", "value": 1}), "CUSTOM"),
    ] {
        let mut events = errored.to_vec();
        events.push(next);
        assert_eq!(
            rejects_last(&events),
            format!(
                "Cannot send event type '{ty}': The run has already errored with 'RUN_ERROR'. No further events can be sent."
            )
        );
    }
    // RUN_ERROR abandons whatever was open: the next run starts clean.
    let mut events = errored.to_vec();
    events.extend([
        started("r2"),
        text_start("m1", None),
        text_end("m1", None),
        finished("r2"),
    ]);
    accepts(&events);
}

#[test]
fn nothing_but_run_started_or_run_error_follows_run_finished() {
    for (next, ty) in [
        (json!({"type": "CUSTOM", "name": "n", "value": 1}), "CUSTOM"),
        (finished("r1"), "RUN_FINISHED"),
        (
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"}),
            "TEXT_MESSAGE_CHUNK",
        ),
        (subagent_started("s1", None), "SUBAGENT_STARTED"),
    ] {
        assert_eq!(
            rejects_last(&[started("r1"), finished("r1"), next]),
            format!(
                "Cannot send event type '{ty}': The run has already finished with 'RUN_FINISHED'. Start a new run with 'RUN_STARTED'."
            )
        );
    }
}

#[test]
fn a_late_run_error_is_accepted_once() {
    accepts(&[started("r1"), finished("r1"), run_error()]);
    assert_eq!(
        rejects_last(&[started("r1"), finished("r1"), run_error(), run_error()]),
        "Cannot send event type 'RUN_ERROR': The run has already errored with 'RUN_ERROR'. No further events can be sent."
    );
    accepts(&[
        started("r1"),
        finished("r1"),
        run_error(),
        started("r2"),
        finished("r2"),
    ]);
}

#[test]
fn runs_do_not_nest() {
    let message = "Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with 'RUN_FINISHED' before starting a new run.";
    assert_eq!(rejects_last(&[started("r1"), started("r2")]), message);
    assert_eq!(
        rejects_last(&[started("r1"), finished("r1"), started("r2"), started("r3")]),
        message
    );
    assert_eq!(
        rejects_last(&[run_error(), started("r1"), started("r2")]),
        message
    );
}

#[test]
fn a_new_run_forgets_the_previous_one() {
    accepts(&[
        started("r1"),
        text_start("m1", Some("A")),
        text_end("m1", Some("A")),
        tool_start("t1", None, Some("A")),
        tool_end("t1", None),
        subagent_started("s1", None),
        subagent_finished("s1"),
        activity_snapshot("a1", None, Some("A")),
        finished("r1"),
        // Owners, closed subagents and activities were all per run.
        started("r2"),
        text_start("m1", Some("B")),
        text_end("m1", None),
        tool_start("t1", None, Some("B")),
        tool_end("t1", Some("B")),
        subagent_started("s1", None),
        subagent_finished("s1"),
        activity_delta("a1", Some("B")),
        finished("r2"),
    ]);
}

#[test]
fn unknown_events_pass_untouched() {
    let unknown = json!({"type": "SOMETHING_NEW", "x": 1});
    // Not counted as the first event...
    assert_eq!(
        rejects_last(&[unknown.clone(), text_start("m1", None)]),
        "First event must be 'RUN_STARTED'"
    );
    // ...and not held to the run boundaries.
    accepts(&[
        unknown.clone(),
        started("r1"),
        finished("r1"),
        unknown.clone(),
        run_error(),
        unknown,
    ]);
}

#[test]
fn state_raw_custom_and_chunks_pass_inside_a_run() {
    accepts(&[
        started("r1"),
        json!({"type": "STATE_SNAPSHOT", "snapshot": null, "subagentRunId": "A"}),
        json!({"type": "STATE_DELTA", "delta": []}),
        json!({"type": "RAW", "event": {}}),
        json!({"type": "CUSTOM", "name": "n", "value": 1}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}),
        json!({"type": "TOOL_CALL_CHUNK", "delta": "x"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "delta": "x"}),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "tm", "toolCallId": "never-started", "content": "42"}),
        finished("r1"),
    ]);
}

// ---- text messages and tool calls ----

#[test]
fn text_messages_open_and_close() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", None),
            text_start("m1", None)
        ]),
        "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID 'm1' is already in progress. Complete it with 'TEXT_MESSAGE_END' first."
    );
    assert_eq!(
        rejects_last(&[started("r1"), text_content("m1", None)]),
        "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'm1'. Start a text message with 'TEXT_MESSAGE_START' first."
    );
    assert_eq!(
        rejects_last(&[started("r1"), text_end("m1", None)]),
        "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID 'm1'. A 'TEXT_MESSAGE_START' event must be sent first."
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", None),
            text_end("m1", None),
            text_content("m1", None)
        ]),
        "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'm1'. Start a text message with 'TEXT_MESSAGE_START' first."
    );
}

#[test]
fn a_closed_id_may_be_reopened() {
    accepts(&[
        started("r1"),
        text_start("m1", None),
        text_end("m1", None),
        text_start("m1", None),
        text_content("m1", None),
        text_end("m1", None),
        tool_start("t1", None, None),
        tool_end("t1", None),
        tool_start("t1", None, None),
        tool_end("t1", None),
        reasoning("REASONING_START", "r", None),
        reasoning("REASONING_END", "r", None),
        reasoning("REASONING_START", "r", None),
        reasoning("REASONING_END", "r", None),
        finished("r1"),
    ]);
}

#[test]
fn tool_calls_open_and_close() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            tool_start("t1", None, None),
            tool_start("t1", None, None)
        ]),
        "Cannot send 'TOOL_CALL_START' event: A tool call with ID 't1' is already in progress. Complete it with 'TOOL_CALL_END' first."
    );
    assert_eq!(
        rejects_last(&[started("r1"), tool_args("t1", None)]),
        "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID 't1'. Start a tool call with 'TOOL_CALL_START' first."
    );
    assert_eq!(
        rejects_last(&[started("r1"), tool_end("t1", None)]),
        "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID 't1'. A 'TOOL_CALL_START' event must be sent first."
    );
}

#[test]
fn messages_and_tool_calls_interleave() {
    accepts(&[
        started("r1"),
        text_start("m1", None),
        tool_start("t1", Some("m1"), None),
        text_content("m1", None),
        tool_args("t1", None),
        text_start("m2", None),
        text_end("m1", None),
        tool_end("t1", None),
        text_end("m2", None),
        finished("r1"),
    ]);
}

// ---- RUN_FINISHED with open items ----

#[test]
fn run_finished_reports_open_items_in_the_reference_order() {
    let mut events = vec![
        started("r1"),
        subagent_started("s1", None),
        tool_start("t1", None, None),
        reasoning("REASONING_START", "rs", None),
        reasoning("REASONING_MESSAGE_START", "rm", None),
        text_start("m1", None),
        step(true, "plan", None),
    ];
    let closers = [
        (
            step(false, "plan", None),
            "Cannot send 'RUN_FINISHED' while steps are still active: plan",
        ),
        (
            text_end("m1", None),
            "Cannot send 'RUN_FINISHED' while text messages are still active: m1",
        ),
        (
            reasoning("REASONING_MESSAGE_END", "rm", None),
            "Cannot send 'RUN_FINISHED' while reasoning messages are still active: rm",
        ),
        (
            reasoning("REASONING_END", "rs", None),
            "Cannot send 'RUN_FINISHED' while reasoning spans are still active: rs",
        ),
        (
            tool_end("t1", None),
            "Cannot send 'RUN_FINISHED' while tool calls are still active: t1",
        ),
        (
            subagent_finished("s1"),
            "Cannot send 'RUN_FINISHED' while subagents are still active: s1",
        ),
    ];
    for (closer, message) in closers {
        let mut attempt = events.clone();
        attempt.push(finished("r1"));
        assert_eq!(rejects_last(&attempt), message);
        events.push(closer);
    }
    events.push(finished("r1"));
    accepts(&events);
}

#[test]
fn open_ids_are_listed_in_the_order_they_were_last_opened() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", None),
            text_start("m2", None),
            text_start("m3", None),
            text_end("m1", None),
            text_start("m1", None),
            finished("r1"),
        ]),
        "Cannot send 'RUN_FINISHED' while text messages are still active: m2, m3, m1"
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            tool_start("t2", None, None),
            tool_start("t1", None, None),
            finished("r1"),
        ]),
        "Cannot send 'RUN_FINISHED' while tool calls are still active: t2, t1"
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_MESSAGE_START", "b", None),
            reasoning("REASONING_MESSAGE_START", "a", None),
            finished("r1"),
        ]),
        "Cannot send 'RUN_FINISHED' while reasoning messages are still active: b, a"
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_START", "b", None),
            reasoning("REASONING_START", "a", None),
            finished("r1"),
        ]),
        "Cannot send 'RUN_FINISHED' while reasoning spans are still active: b, a"
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            subagent_started("B", None),
            subagent_started("A", None),
            subagent_started("", None),
            subagent_finished("A"),
            finished("r1"),
        ]),
        "Cannot send 'RUN_FINISHED' while subagents are still active: B, "
    );
}

#[test]
fn open_steps_are_listed_per_owner_in_the_order_owners_first_started_one() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "plan", Some("A")),
            step(true, "tools", None),
            step(true, "plan", None),
            step(true, "x", Some("")),
            finished("r1"),
        ]),
        "Cannot send 'RUN_FINISHED' while steps are still active: plan (subagent 'A'), tools, plan, x (subagent '')"
    );
    // An owner keeps its place after its steps have all finished.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "a", Some("A")),
            step(false, "a", Some("A")),
            step(true, "b", None),
            step(true, "c", Some("A")),
            finished("r1"),
        ]),
        "Cannot send 'RUN_FINISHED' while steps are still active: c (subagent 'A'), b"
    );
    // Within an owner, a restarted step moves to the end.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "a", None),
            step(true, "b", None),
            step(false, "a", None),
            step(true, "a", None),
            finished("r1"),
        ]),
        "Cannot send 'RUN_FINISHED' while steps are still active: b, a"
    );
}

// ---- steps ----

#[test]
fn a_step_is_started_once_per_owner() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "plan", None),
            step(true, "plan", None)
        ]),
        "Step \"plan\" is already active for 'STEP_STARTED'"
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "plan", Some("A")),
            step(true, "plan", Some("A"))
        ]),
        "Step \"plan\" is already active for 'STEP_STARTED' in subagent 'A'"
    );
    // The same name under different owners is two steps; "" is not the parent.
    accepts(&[
        started("r1"),
        step(true, "tools", None),
        step(true, "tools", Some("A")),
        step(true, "tools", Some("")),
        step(false, "tools", Some("A")),
        step(false, "tools", Some("")),
        step(false, "tools", None),
        step(true, "tools", None),
        step(false, "tools", None),
        finished("r1"),
    ]);
}

#[test]
fn a_step_is_finished_by_whoever_started_it() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "plan", None),
            step(false, "plan", Some("A"))
        ]),
        "Cannot send 'STEP_FINISHED' for step \"plan\" attributed to subagent 'A': that step is open under the parent agent. A step must be finished by whoever started it."
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "plan", Some("A")),
            step(false, "plan", None)
        ]),
        "Cannot send 'STEP_FINISHED' for step \"plan\" attributed to the parent agent: that step is open under subagent 'A'. A step must be finished by whoever started it."
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "plan", None),
            step(false, "plan", Some(""))
        ]),
        "Cannot send 'STEP_FINISHED' for step \"plan\" attributed to subagent '': that step is open under the parent agent. A step must be finished by whoever started it."
    );
    // The owner named is the first, in the order owners first started a step.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "other", Some("B")),
            step(true, "plan", Some("A")),
            step(true, "plan", Some("B")),
            step(false, "plan", Some("C"))
        ]),
        "Cannot send 'STEP_FINISHED' for step \"plan\" attributed to subagent 'C': that step is open under subagent 'B'. A step must be finished by whoever started it."
    );
}

#[test]
fn a_step_must_be_started_before_it_finishes() {
    let message = "Cannot send 'STEP_FINISHED' for step \"plan\" that was not started";
    assert_eq!(
        rejects_last(&[started("r1"), step(false, "plan", None)]),
        message
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            step(true, "plan", Some("A")),
            step(false, "plan", Some("A")),
            step(false, "plan", None)
        ]),
        message
    );
}

// ---- reasoning ----

#[test]
fn reasoning_spans_and_messages_open_and_close_separately() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_START", "r", None),
            reasoning("REASONING_START", "r", None)
        ]),
        "Cannot send 'REASONING_START' event: A reasoning span with ID 'r' is already in progress. Complete it with 'REASONING_END' first."
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_MESSAGE_START", "r", None),
            reasoning("REASONING_MESSAGE_START", "r", None)
        ]),
        "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID 'r' is already in progress. Complete it with 'REASONING_MESSAGE_END' first."
    );
    assert_eq!(
        rejects_last(&[started("r1"), reasoning("REASONING_END", "r", None)]),
        "Cannot send 'REASONING_END' event: No active reasoning span found with ID 'r'. A 'REASONING_START' event must be sent first."
    );
    for ty in ["REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"] {
        // A span of that id is open, but a span is not a message.
        assert_eq!(
            rejects_last(&[
                started("r1"),
                reasoning("REASONING_START", "r", None),
                reasoning(ty, "r", None)
            ]),
            format!(
                "Cannot send '{ty}' event: No active reasoning message found with ID 'r'. Start a reasoning message with 'REASONING_MESSAGE_START' first."
            )
        );
    }
    // The canonical shape: a span and the message inside it share an id.
    accepts(&[
        started("r1"),
        reasoning("REASONING_START", "r", Some("A")),
        reasoning("REASONING_MESSAGE_START", "r", None),
        reasoning("REASONING_MESSAGE_CONTENT", "r", Some("A")),
        reasoning("REASONING_MESSAGE_END", "r", None),
        reasoning("REASONING_END", "r", Some("A")),
        finished("r1"),
    ]);
    // Each terminal closes only its own entity.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_START", "r", None),
            reasoning("REASONING_MESSAGE_START", "r", None),
            reasoning("REASONING_END", "r", None),
            finished("r1")
        ]),
        "Cannot send 'RUN_FINISHED' while reasoning messages are still active: r"
    );
}

#[test]
fn a_reasoning_span_and_its_message_share_one_owner() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_START", "r", Some("A")),
            reasoning("REASONING_MESSAGE_START", "r", Some("B"))
        ]),
        mismatch(
            "REASONING_MESSAGE_START",
            "B",
            "reasoning message",
            "r",
            "A"
        )
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_MESSAGE_START", "r", None),
            reasoning("REASONING_MESSAGE_CONTENT", "r", Some("A"))
        ]),
        mismatch(
            "REASONING_MESSAGE_CONTENT",
            "A",
            "reasoning message",
            "r",
            PARENT
        )
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_MESSAGE_START", "r", Some("A")),
            reasoning("REASONING_MESSAGE_END", "r", Some("B"))
        ]),
        mismatch("REASONING_MESSAGE_END", "B", "reasoning message", "r", "A")
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_START", "r", Some("A")),
            reasoning("REASONING_END", "r", Some(""))
        ]),
        mismatch("REASONING_END", "", "reasoning message", "r", "A")
    );
    // The owner outlives the close: a reopen by someone else is a contradiction.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_START", "r", Some("A")),
            reasoning("REASONING_END", "r", None),
            reasoning("REASONING_START", "r", Some("B"))
        ]),
        mismatch("REASONING_START", "B", "reasoning message", "r", "A")
    );
}

// ---- subagents ----

#[test]
fn subagent_lifecycle() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            subagent_started("s1", None),
            subagent_started("s1", None)
        ]),
        "Cannot send 'SUBAGENT_STARTED': subagent 's1' is already active. Finish it with 'SUBAGENT_FINISHED' first."
    );
    for terminal in [subagent_finished("s1"), subagent_error("s1")] {
        assert_eq!(
            rejects_last(&[
                started("r1"),
                subagent_started("s1", None),
                terminal,
                subagent_started("s1", None)
            ]),
            "Cannot send 'SUBAGENT_STARTED': subagent 's1' has already finished in this run. Subagent IDs are per-invocation and cannot be reused."
        );
    }
    assert_eq!(
        rejects_last(&[started("r1"), subagent_started("s2", Some("s1"))]),
        "Cannot send 'SUBAGENT_STARTED': parentSubagentRunId 's1' has not been started in this run."
    );
    assert_eq!(
        rejects_last(&[started("r1"), subagent_finished("s1")]),
        "Cannot send 'SUBAGENT_FINISHED': no active subagent found with ID 's1'. A 'SUBAGENT_STARTED' event must be sent first."
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            subagent_started("s1", None),
            subagent_finished("s1"),
            subagent_error("s1")
        ]),
        "Cannot send 'SUBAGENT_ERROR': no active subagent found with ID 's1'. A 'SUBAGENT_STARTED' event must be sent first."
    );
    // A parent that already finished still counts as started in this run.
    accepts(&[
        started("r1"),
        subagent_started("s1", None),
        subagent_started("s2", Some("s1")),
        subagent_finished("s1"),
        subagent_started("s3", Some("s1")),
        subagent_error("s2"),
        subagent_finished("s3"),
        finished("r1"),
    ]);
}

#[test]
fn attribution_does_not_need_subagent_lifecycle_events() {
    accepts(&[
        started("r1"),
        text_start("m1", Some("never-started")),
        text_content("m1", Some("never-started")),
        text_end("m1", None),
        step(true, "plan", Some("never-started")),
        step(false, "plan", Some("never-started")),
        subagent_started("s1", None),
        subagent_finished("s1"),
        // Tagging with a closed subagent is not a contradiction either.
        text_start("m2", Some("s1")),
        text_end("m2", Some("s1")),
        finished("r1"),
    ]);
}

// ---- attribution of continuations ----

#[test]
fn text_continuations_agree_with_the_opener() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", None),
            text_content("m1", Some("A"))
        ]),
        mismatch("TEXT_MESSAGE_CONTENT", "A", "message", "m1", PARENT)
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            text_end("m1", Some("B"))
        ]),
        mismatch("TEXT_MESSAGE_END", "B", "message", "m1", "A")
    );
    // The empty string is a subagent id, not the parent.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("")),
            text_content("m1", None),
            text_content("m1", Some("A"))
        ]),
        mismatch("TEXT_MESSAGE_CONTENT", "A", "message", "m1", "")
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", None),
            text_content("m1", Some(""))
        ]),
        mismatch("TEXT_MESSAGE_CONTENT", "", "message", "m1", PARENT)
    );
}

#[test]
fn the_first_writer_owns_an_id_for_the_whole_run() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            text_end("m1", None),
            text_start("m1", Some("B"))
        ]),
        mismatch("TEXT_MESSAGE_START", "B", "message", "m1", "A")
    );
    // An untagged reopen agrees with anyone and does not hand the id to the parent.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            text_end("m1", None),
            text_start("m1", None),
            text_content("m1", Some("A")),
            text_content("m1", Some("B"))
        ]),
        mismatch("TEXT_MESSAGE_CONTENT", "B", "message", "m1", "A")
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            tool_start("t1", None, Some("A")),
            tool_end("t1", None),
            tool_start("t1", None, Some("B"))
        ]),
        mismatch("TOOL_CALL_START", "B", "tool call", "t1", "A")
    );
}

#[test]
fn tool_call_continuations_agree_with_the_opener() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            tool_start("t1", None, Some("A")),
            tool_args("t1", Some("B"))
        ]),
        mismatch("TOOL_CALL_ARGS", "B", "tool call", "t1", "A")
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            tool_start("t1", None, None),
            tool_end("t1", Some("A"))
        ]),
        mismatch("TOOL_CALL_END", "A", "tool call", "t1", PARENT)
    );
}

#[test]
fn a_tool_call_belongs_to_its_parent_message() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            tool_start("t1", Some("m1"), Some("B"))
        ]),
        "Cannot send 'TOOL_CALL_START': subagentRunId 'B' does not match its parent message 'm1' owner 'A'. A tool call belongs to the message that carries it."
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", None),
            text_end("m1", None),
            tool_start("t1", Some("m1"), Some("A"))
        ]),
        "Cannot send 'TOOL_CALL_START': subagentRunId 'A' does not match its parent message 'm1' owner '(the parent agent)'. A tool call belongs to the message that carries it."
    );
    // Untagged, it inherits the parent message's owner.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            tool_start("t1", Some("m1"), None),
            tool_args("t1", Some("A")),
            tool_args("t1", Some("B"))
        ]),
        mismatch("TOOL_CALL_ARGS", "B", "tool call", "t1", "A")
    );
    // A parent nothing knows of constrains nothing.
    accepts(&[
        started("r1"),
        tool_start("t1", Some("unknown"), Some("A")),
        tool_end("t1", Some("A")),
        finished("r1"),
    ]);
}

#[test]
fn an_untagged_reopen_cannot_move_a_tool_call_to_another_owners_message() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            text_start("m2", Some("B")),
            tool_start("t1", Some("m1"), None),
            tool_end("t1", None),
            tool_start("t1", Some("m2"), None)
        ]),
        "Cannot send 'TOOL_CALL_START': tool call 't1' is owned by 'A' but its parent message 'm2' is owned by 'B'. A tool call belongs to the message that carries it."
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m2", Some("B")),
            tool_start("t1", None, None),
            tool_end("t1", None),
            tool_start("t1", Some("m2"), None)
        ]),
        "Cannot send 'TOOL_CALL_START': tool call 't1' is owned by '(the parent agent)' but its parent message 'm2' is owned by 'B'. A tool call belongs to the message that carries it."
    );
    // A tagged reopen is judged by its tag: against the parent first, then the call.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            text_start("m2", Some("B")),
            tool_start("t1", Some("m1"), None),
            tool_end("t1", None),
            tool_start("t1", Some("m2"), Some("B"))
        ]),
        mismatch("TOOL_CALL_START", "B", "tool call", "t1", "A")
    );
}

#[test]
fn encrypted_values_agree_with_the_entity_their_subtype_names() {
    // The owner of a closed tool call is still on record.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            tool_start("t1", None, Some("A")),
            tool_end("t1", None),
            encrypted("tool-call", "t1", Some("B"))
        ]),
        mismatch("REASONING_ENCRYPTED_VALUE", "B", "tool call", "t1", "A")
    );
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", None),
            encrypted("message", "m1", Some("B"))
        ]),
        mismatch("REASONING_ENCRYPTED_VALUE", "B", "message", "m1", PARENT)
    );
    // A "message" may be a reasoning message.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            reasoning("REASONING_MESSAGE_START", "r", Some("A")),
            encrypted("message", "r", Some("B"))
        ]),
        mismatch("REASONING_ENCRYPTED_VALUE", "B", "message", "r", "A")
    );
    accepts(&[
        started("r1"),
        // Kinds are separate namespaces: the message subtype ignores tool calls...
        tool_start("x", None, Some("A")),
        encrypted("message", "x", Some("B")),
        // ...the tool-call subtype ignores messages...
        text_start("y", Some("A")),
        encrypted("tool-call", "y", Some("B")),
        // ...an unknown entity has no opener to disagree with...
        encrypted("message", "nobody", Some("B")),
        // ...and an untagged value never disagrees.
        encrypted("tool-call", "x", None),
        tool_end("x", None),
        text_end("y", None),
        finished("r1"),
    ]);
}

#[test]
fn activity_deltas_agree_with_the_snapshot_that_owns_the_activity() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            activity_snapshot("a1", None, Some("A")),
            activity_delta("a1", Some("B"))
        ]),
        mismatch("ACTIVITY_DELTA", "B", "activity", "a1", "A")
    );
    // replace:false leaves an existing activity, and its owner, alone.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            activity_snapshot("a1", None, Some("A")),
            activity_snapshot("a1", Some(false), Some("B")),
            activity_delta("a1", Some("B"))
        ]),
        mismatch("ACTIVITY_DELTA", "B", "activity", "a1", "A")
    );
    // A replacing snapshot re-owns it.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            activity_snapshot("a1", None, Some("A")),
            activity_snapshot("a1", Some(true), None),
            activity_delta("a1", Some("A"))
        ]),
        mismatch("ACTIVITY_DELTA", "A", "activity", "a1", PARENT)
    );
    accepts(&[
        started("r1"),
        activity_snapshot("a1", Some(false), Some("B")),
        activity_delta("a1", Some("B")),
        activity_snapshot("a1", None, Some("A")),
        activity_delta("a1", Some("A")),
        activity_delta("unknown", Some("A")),
        finished("r1"),
    ]);
}

#[test]
fn a_tool_call_result_owns_the_message_it_mints() {
    let result = |tag: Option<&str>| {
        tagged(
            json!({"type": "TOOL_CALL_RESULT", "messageId": "tm", "toolCallId": "t1", "content": "42"}),
            tag,
        )
    };
    assert_eq!(
        rejects_last(&[
            started("r1"),
            result(Some("A")),
            text_start("tm", Some("B"))
        ]),
        mismatch("TEXT_MESSAGE_START", "B", "message", "tm", "A")
    );
    // The newest mint wins, untagged included.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            result(Some("A")),
            result(None),
            text_start("tm", Some("A"))
        ]),
        mismatch("TEXT_MESSAGE_START", "A", "message", "tm", PARENT)
    );
}

#[test]
fn a_messages_snapshot_replaces_recorded_owners() {
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            text_end("m1", None),
            snapshot(&json!([user("m1", Some("B"))])),
            text_start("m1", Some("A"))
        ]),
        mismatch("TEXT_MESSAGE_START", "A", "message", "m1", "B")
    );
    // Even the owner of an open message; and within a snapshot the last copy wins.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            snapshot(&json!([user("m1", Some("C")), user("m1", None)])),
            text_content("m1", Some("A"))
        ]),
        mismatch("TEXT_MESSAGE_CONTENT", "A", "message", "m1", PARENT)
    );
    // Each role seeds the kind it streams as; tool calls take their message's owner.
    let messages = json!([
        {"id": "r", "role": "reasoning", "content": "hmm", "subagentRunId": "A"},
        {"id": "a", "role": "activity", "activityType": "PLAN", "content": {}, "subagentRunId": "A"},
        {"id": "m", "role": "assistant", "subagentRunId": "A", "toolCalls": [
            {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]},
    ]);
    for (next, message) in [
        (
            reasoning("REASONING_START", "r", Some("B")),
            mismatch("REASONING_START", "B", "reasoning message", "r", "A"),
        ),
        (
            activity_delta("a", Some("B")),
            mismatch("ACTIVITY_DELTA", "B", "activity", "a", "A"),
        ),
        (
            tool_start("t", None, Some("B")),
            mismatch("TOOL_CALL_START", "B", "tool call", "t", "A"),
        ),
        (
            text_start("m", Some("B")),
            mismatch("TEXT_MESSAGE_START", "B", "message", "m", "A"),
        ),
    ] {
        assert_eq!(
            rejects_last(&[started("r1"), snapshot(&messages), next]),
            message
        );
    }
    // A reasoning message is not a text message.
    accepts(&[
        started("r1"),
        snapshot(&messages),
        text_start("r", Some("B")),
        text_end("r", None),
        finished("r1"),
    ]);
}

#[test]
fn the_run_started_input_seeds_only_unclaimed_owners() {
    let with_input = |run: &str, messages: Value| {
        let mut event = started(run);
        event["input"] = json!({"threadId": "th", "runId": run, "messages": messages});
        event
    };
    assert_eq!(
        rejects_last(&[
            with_input("r1", json!([user("m1", Some("A")), user("m1", Some("B"))])),
            text_start("m1", Some("B"))
        ]),
        mismatch("TEXT_MESSAGE_START", "B", "message", "m1", "A")
    );
    // Seeded after the previous run was forgotten.
    assert_eq!(
        rejects_last(&[
            started("r1"),
            text_start("m1", Some("A")),
            text_end("m1", None),
            finished("r1"),
            with_input("r2", json!([user("m1", None)])),
            text_start("m1", Some("A"))
        ]),
        mismatch("TEXT_MESSAGE_START", "A", "message", "m1", PARENT)
    );
}

// ---- identity (seeded verifier) ----

#[test]
fn a_seeded_verifier_holds_every_run_to_the_input_thread() {
    assert_eq!(
        rejects_last_with(
            Verifier::for_thread("th"),
            &[json!({"type": "RUN_STARTED", "threadId": "other", "runId": "r1"})]
        ),
        "Cannot send 'RUN_STARTED' with threadId 'other': this stream belongs to thread 'th'. Every run on a stream carries the input's threadId."
    );
    assert_eq!(
        rejects_last_with(
            Verifier::for_thread("th"),
            &[
                started("r1"),
                finished("r1"),
                json!({"type": "RUN_STARTED", "threadId": "other", "runId": "r2"})
            ]
        ),
        "Cannot send 'RUN_STARTED' with threadId 'other': this stream belongs to thread 'th'. Every run on a stream carries the input's threadId."
    );
    assert_eq!(
        rejects_last_with(
            Verifier::for_thread("th"),
            &[
                started("r1"),
                step(true, "open", None),
                json!({"type": "RUN_FINISHED", "threadId": "other", "runId": "r1"})
            ]
        ),
        "Cannot send 'RUN_FINISHED' with threadId 'other': run 'r1' was opened on thread 'th'. A run's boundary events carry the input's threadId."
    );
    assert_eq!(
        run_with(
            Verifier::for_thread("th"),
            &[
                started("r1"),
                finished("r1"),
                run_error(),
                started("r2"),
                finished("r2"),
            ]
        ),
        Ok(())
    );
}

#[test]
fn identity_beyond_the_thread_is_left_to_the_judge() {
    // @ag-ui/client 1.0.0 accepts all of these, seeded or not.
    let interrupt = |id: &str| json!({"id": id, "reason": "input_required"});
    let streams = [
        vec![
            json!({"type": "RUN_STARTED", "threadId": "th", "runId": "r1"}),
            json!({"type": "RUN_FINISHED", "threadId": "th", "runId": "r2"}),
        ],
        vec![
            started("r1"),
            json!({"type": "RUN_FINISHED", "threadId": "th", "runId": "r1", "outcome": {
                "type": "interrupt", "interrupts": [interrupt("i1"), interrupt("i1")]
            }}),
        ],
    ];
    for stream in streams {
        assert_eq!(run_with(Verifier::for_thread("th"), &stream), Ok(()));
        assert_eq!(run_with(Verifier::new(), &stream), Ok(()));
    }
    // An unseeded verifier checks no thread at all.
    accepts(&[
        json!({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}),
        json!({"type": "RUN_FINISHED", "threadId": "t2", "runId": "r1"}),
        json!({"type": "RUN_STARTED", "threadId": "t3", "runId": "r2"}),
    ]);
}
