//! Decoding: what is tolerated, what is stripped (and reported where), what fails
//! and how the failure reads.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use agwire_core::decode::{DecodeMode, decode};
use agwire_core::{
    Content, ContentPart, Event, EventType, Message, PartSource, RunAgentInput, RunFinishedOutcome,
    WarningKind,
};
use serde_json::json;

fn lenient(v: serde_json::Value) -> agwire_core::Decoded<Event> {
    Event::from_value(v).expect("decodes")
}

fn error(v: serde_json::Value) -> String {
    Event::from_value(v).expect_err("rejected").to_string()
}

#[test]
fn snake_case_spellings_are_accepted_everywhere() {
    let input = decode::<RunAgentInput>(
        json!({
            "thread_id": "t", "run_id": "r", "parent_run_id": "p",
            "forwarded_props": {"runtime_mode": "chat"},
            "messages": [{"id": "u", "role": "tool", "content": "x", "tool_call_id": "c"}]
        }),
        DecodeMode::Lenient,
    )
    .unwrap();
    assert!(input.warnings.is_empty(), "{:?}", input.warnings);
    let input = input.value;
    assert_eq!(
        (input.thread_id.as_str(), input.run_id.as_str()),
        ("t", "r")
    );
    assert_eq!(input.parent_run_id.as_deref(), Some("p"));
    // forwardedProps is opaque: its own keys are not renamed
    assert_eq!(input.forwarded_props, Some(json!({"runtime_mode": "chat"})));
    match &input.messages[0] {
        Message::Tool(m) => assert_eq!(m.tool_call_id, "c"),
        other => panic!("{other:?}"),
    }
    // and the output is camelCase
    let out = serde_json::to_value(&input).unwrap();
    assert_eq!(out["threadId"], "t");
    assert_eq!(out["messages"][0]["toolCallId"], "c");
}

#[test]
fn strict_mode_refuses_snake_case() {
    let err = decode::<RunAgentInput>(
        json!({"thread_id": "t", "runId": "r", "messages": []}),
        DecodeMode::Strict,
    )
    .unwrap_err();
    assert_eq!(err.path, "/threadId");
}

#[test]
fn unknown_members_are_stripped_with_their_pointer() {
    let d = lenient(json!({
        "type": "MESSAGES_SNAPSHOT",
        "messages": [{"id": "1", "role": "user", "content": [{"type": "text", "text": "a", "x": 1}], "y": 2}],
        "z": 3
    }));
    let paths: Vec<_> = d.warnings.iter().map(|w| w.message.clone()).collect();
    assert_eq!(d.warnings.len(), 3, "{paths:?}");
    assert!(paths[0].contains("'/messages/0/content/0/x' on MESSAGES_SNAPSHOT"));
    assert!(paths[1].contains("'/messages/0/y'"));
    assert!(paths[2].contains("'/z'"));
    assert!(d.warnings.iter().all(|w| w.kind == WarningKind::Stripped));
}

#[test]
fn unrecognised_union_members_remove_their_element() {
    let d = lenient(json!({
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {"id": "1", "role": "narrator", "content": "x", "junk": 1},
            {"id": "2", "role": "user", "content": [
                {"type": "sticker"},
                {"type": "image", "source": {"type": "hologram", "value": "v"}, "extra": 1},
                {"type": "text", "text": "kept"}
            ]}
        ]
    }));
    let Event::MessagesSnapshot(s) = &d.value else {
        panic!()
    };
    assert_eq!(s.messages.len(), 1);
    assert_eq!(s.messages[0].id(), "2");
    let Message::User(u) = &s.messages[0] else {
        panic!()
    };
    assert_eq!(u.content, Content::Parts(vec![ContentPart::text("kept")]));
    let msgs: Vec<_> = d.warnings.iter().map(|w| w.message.as_str()).collect();
    // the dropped message's own members are not reported separately: it went whole
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs[0].contains("'/messages/0'"));
    assert!(msgs[1].contains("'/messages/1/content/0'"));
    assert!(msgs[2].contains("'/messages/1/content/1'"));
}

#[test]
fn unknown_outcome_is_removed_but_a_malformed_one_is_fatal() {
    let d = lenient(
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "paused"}}),
    );
    let Event::RunFinished(f) = &d.value else {
        panic!()
    };
    assert_eq!(f.outcome, None);
    assert!(d.warnings[0].message.contains("'/outcome'"));

    let e = error(json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": []}));
    assert_eq!(
        e,
        "invalid RUN_FINISHED at '/outcome': expected object, received array"
    );
}

#[test]
fn malformed_values_name_field_and_reason() {
    assert_eq!(
        error(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 5})),
        "invalid TEXT_MESSAGE_CONTENT at '/delta': expected string, received number"
    );
    assert_eq!(
        error(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"})),
        "invalid TEXT_MESSAGE_CONTENT at '/delta': expected string, received undefined"
    );
    assert_eq!(
        error(json!({"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": null})),
        "invalid TEXT_MESSAGE_END at '/metadata': expected object, received null"
    );
    assert!(
        error(json!({"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "assistant"}))
            .contains("expected \"reasoning\"")
    );
    assert!(
        error(json!({"type": "TEXT_MESSAGE_END", "messageId": "m", "timestamp": 1.5}))
            .contains("/timestamp")
    );
    assert!(
        error(
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
        "outcome": {"type": "interrupt", "interrupts": []}})
        )
        .contains("requires at least one interrupt")
    );
    assert!(
        error(json!({"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "a"}]}))
            .contains("/delta/0/path")
    );
}

#[test]
fn unknown_events_are_kept_whole() {
    let d = lenient(json!({"type": "FUTURE_EVENT", "payload": {"a": null}}));
    match &d.value {
        Event::Unknown(u) => {
            assert_eq!(u.event_type, "FUTURE_EVENT");
            assert_eq!(u.value["payload"], json!({"a": null}));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(d.value.event_type(), None);
    assert_eq!(d.value.type_name(), "FUTURE_EVENT");
    assert_eq!(
        d.value.to_json(),
        r#"{"type":"FUTURE_EVENT","payload":{"a":null}}"#
    );
}

#[test]
fn legacy_nulls_read_as_absent() {
    let d = lenient(
        json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "n",
        "parentMessageId": null, "rawEvent": null}),
    );
    assert_eq!(
        d.value.to_json(),
        r#"{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"n"}"#
    );
    assert_eq!(d.warnings.len(), 2);
    assert!(
        d.warnings
            .iter()
            .all(|w| w.kind == WarningKind::LegacyTranslated)
    );
    // ... but not in strict mode, and not for fields outside the shim list
    assert!(Event::from_value_with(
        json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "n", "parentMessageId": null}),
        DecodeMode::Strict
    )
    .is_err());
    assert!(
        Event::from_value(json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "name": null}))
            .is_err()
    );
}

#[test]
fn legacy_binary_parts_are_upgraded() {
    let m = decode::<Message>(
        json!({"id": "1", "role": "user", "content": [
            {"type": "binary", "mimeType": "application/pdf", "url": "https://x/a.pdf", "filename": "a.pdf"},
            {"type": "binary", "mimeType": "image/png", "data": "aGk="},
            {"type": "binary", "mimeType": "image/png", "id": "only-an-id"}
        ]}),
        DecodeMode::Lenient,
    )
    .unwrap();
    let Message::User(u) = m.value else { panic!() };
    let Content::Parts(parts) = u.content else {
        panic!()
    };
    assert_eq!(
        parts.len(),
        2,
        "the id-only part cannot be upgraded and is removed"
    );
    match &parts[0] {
        ContentPart::Document(d) => {
            assert_eq!(
                d.source,
                PartSource::Url {
                    value: "https://x/a.pdf".into(),
                    mime_type: Some("application/pdf".into())
                }
            );
            assert_eq!(d.metadata, Some(json!({"filename": "a.pdf"})));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&parts[1], ContentPart::Image(i) if matches!(&i.source, PartSource::Data { value, .. } if value == "aGk="))
    );
}

#[test]
fn nulls_that_are_values_survive() {
    for (input, out) in [
        (
            json!({"type": "STATE_SNAPSHOT", "snapshot": null}),
            r#"{"type":"STATE_SNAPSHOT","snapshot":null}"#,
        ),
        (
            json!({"type": "RAW", "event": null}),
            r#"{"type":"RAW","event":null}"#,
        ),
        (
            json!({"type": "CUSTOM", "name": "n", "value": null}),
            r#"{"type":"CUSTOM","name":"n","value":null}"#,
        ),
        (
            json!({"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/a", "value": null, "note": null}]}),
            r#"{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/a","value":null,"note":null}]}"#,
        ),
    ] {
        assert_eq!(lenient(input).value.to_json(), out);
    }
}

#[test]
fn empty_deltas_and_unicode_are_fine() {
    let d = lenient(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": ""}));
    assert_eq!(d.value.event_type(), Some(EventType::TextMessageContent));
    let d = lenient(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "héllo 🌍"}));
    assert_eq!(
        d.value.to_json(),
        "{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"héllo 🌍\"}"
    );
}

#[test]
fn ids_are_opaque() {
    let d = lenient(json!({"type": "RUN_STARTED", "threadId": "not a uuid / at all", "runId": ""}));
    let Event::RunStarted(s) = d.value else {
        panic!()
    };
    assert_eq!(s.thread_id, "not a uuid / at all");
}

#[test]
fn a_1_0_peer_never_receives_encrypted_value_type() {
    let mut e = lenient(
        json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "m",
        "encryptedValue": "x", "encryptedValueType": "anthropic-thinking"}),
    )
    .value;
    let mut snapshot = lenient(json!({"type": "MESSAGES_SNAPSHOT", "messages": [
        {"id": "a", "role": "assistant", "encryptedValue": "e", "encryptedValueType": "t",
         "toolCalls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": ""},
                        "encryptedValue": "e", "encryptedValueType": "t"}]}]}))
    .value;
    let keep = e.clone();
    e.adapt_for_peer(agwire_core::ProtocolVersion::V1_1);
    assert_eq!(e, keep);
    e.adapt_for_peer(agwire_core::ProtocolVersion::V1_0);
    snapshot.adapt_for_peer(agwire_core::ProtocolVersion::V1_0);
    assert!(!e.to_json().contains("encryptedValueType"));
    assert!(!snapshot.to_json().contains("encryptedValueType"));
    assert!(snapshot.to_json().contains("encryptedValue"));
}

#[test]
fn run_finished_outcomes_round_trip() {
    for outcome in [
        json!({"type": "success"}),
        json!({"type": "success", "pendingToolCallIds": ["c1", "c2"]}),
        json!({"type": "interrupt", "interrupts": [{"id": "i", "reason": "confirmation", "expiresAt": "2030-01-01T00:00:00Z"}]}),
        json!({"type": "cancelled"}),
    ] {
        let v = json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": outcome.clone()});
        let d = lenient(v.clone());
        assert!(d.warnings.is_empty());
        assert_eq!(serde_json::to_value(&d.value).unwrap(), v);
        let Event::RunFinished(f) = d.value else {
            panic!()
        };
        assert!(matches!(
            f.outcome,
            Some(
                RunFinishedOutcome::Success { .. }
                    | RunFinishedOutcome::Interrupt { .. }
                    | RunFinishedOutcome::Cancelled
            )
        ));
    }
}

#[test]
fn serde_deserialize_is_the_lenient_decoder() {
    let e: Event =
        serde_json::from_str(r#"{"type":"STEP_STARTED","step_name":"plan","x":1}"#).unwrap();
    assert_eq!(e.to_json(), r#"{"type":"STEP_STARTED","stepName":"plan"}"#);
    let bad: Result<Event, _> = serde_json::from_str(r#"{"type":"STEP_STARTED"}"#);
    assert!(bad.unwrap_err().to_string().contains("/stepName"));
}
