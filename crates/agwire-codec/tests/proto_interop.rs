//! The protobuf binding against `@ag-ui/proto` 1.0.0 and `@ag-ui/client`, on the
//! official schema fixtures' events and on 10,000+ generated events:
//! (a) our bytes decode in `@ag-ui/proto` to our JSON; (b) our bytes equal
//! `@ag-ui/proto`'s bytes for the same event (open objects are written in their
//! own key order, as JavaScript writes them, so even `Struct` payloads compare
//! exactly); (c) `@ag-ui/proto`'s bytes decode in Rust
//! to the same event; (d) `@ag-ui/client`'s `parseProtoStream` reads our framed
//! output, split at random boundaries, into the same events.
//!
//! The only normalisation is what 1.0 cannot carry: the 1.1 `encryptedValueType`,
//! and the difference between an absent and an empty list (`resume`,
//! `toolCalls`, `interruptIds`, `pendingToolCallIds`, `usage`), which this wire
//! does not carry.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;

use agwire_codec::proto::{FrameDecoder, decode_event, encode_event, encode_frame};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

const SEED: u64 = 0x9B0_2026;
const GENERATED: usize = 10_000;

/// What a 1.0 peer can hold of our JSON.
fn one_zero_view(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::new();
            let is_patch_op =
                map.get("op").is_some_and(Value::is_string) && map.contains_key("path");
            for (k, val) in map {
                // A patch operation's members beyond op/path/from/value have no field.
                if is_patch_op && !["op", "path", "from", "value"].contains(&k.as_str()) {
                    continue;
                }
                let empty_list = val.as_array().is_some_and(Vec::is_empty);
                let list_key = ["toolCalls", "interruptIds", "pendingToolCallIds", "usage"];
                if k == "encryptedValueType" || (empty_list && list_key.contains(&k.as_str())) {
                    continue;
                }
                out.insert(k.clone(), one_zero_view(val));
            }
            if out.contains_key("threadId")
                && out.contains_key("messages")
                && !out.contains_key("resume")
            {
                out.insert("resume".into(), json!([]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(one_zero_view).collect()),
        other => other.clone(),
    }
}

#[test]
fn protobuf_agrees_with_the_official_sdks() {
    let Some(dir) = common::interop_dir() else {
        return;
    };
    let fixtures = common::fixture_events();
    let mut events = fixtures.clone();
    events.extend(common::sample_events(SEED, GENERATED));
    println!(
        "proto: {} fixture events + {GENERATED} generated (seed {SEED:#x})",
        fixtures.len()
    );

    let ours: Vec<Vec<u8>> = events.iter().map(|e| encode_event(e).unwrap()).collect();
    let expected: Vec<Value> = events
        .iter()
        .map(|e| one_zero_view(&serde_json::to_value(e).unwrap()))
        .collect();

    // (a) @ag-ui/proto decodes our bytes to our JSON.
    let jobs: Vec<Value> = ours
        .iter()
        .map(|b| json!({ "bytes": common::b64(b) }))
        .collect();
    let decoded = common::node(&dir, "proto-decode", &jobs);
    for (i, (answer, want)) in decoded.iter().zip(&expected).enumerate() {
        assert_eq!(answer.get("error"), None, "event {i}: {want}");
        assert_eq!(&answer["event"], want, "(a) event {i}");
    }

    // (b) @ag-ui/proto encodes the same event to the same bytes.
    let jobs: Vec<Value> = events
        .iter()
        .map(|e| json!({ "event": serde_json::to_value(e).unwrap() }))
        .collect();
    let theirs = common::node(&dir, "proto-encode", &jobs);
    let mut exact = 0;
    let mut skipped_1_1 = 0;
    for (i, (answer, mine)) in theirs.iter().zip(&ours).enumerate() {
        let bytes = common::unb64(
            answer["bytes"]
                .as_str()
                .unwrap_or_else(|| panic!("event {i}: {answer}")),
        );
        if events[i].to_json().contains("encryptedValueType") {
            skipped_1_1 += 1; // 1.0 drops the field, so its bytes are shorter by design
        } else {
            assert_eq!(&bytes, mine, "(b) event {i}: {}", events[i].to_json());
            exact += 1;
        }
        // (c) their bytes decode in Rust to the same event.
        let back = decode_event(&bytes).unwrap().expect("known event").value;
        assert_eq!(
            one_zero_view(&serde_json::to_value(&back).unwrap()),
            expected[i],
            "(c) event {i}"
        );
    }

    // (d) @ag-ui/client's stream parser reads our frames, split anywhere.
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut jobs = Vec::new();
    for batch in events.chunks(250) {
        let mut body = Vec::new();
        for e in batch {
            encode_frame(e, &mut body).unwrap();
        }
        let mut chunks = Vec::new();
        let mut at = 0;
        while at < body.len() {
            let end = (at + rng.random_range(1..600)).min(body.len());
            chunks.push(common::b64(&body[at..end]));
            at = end;
        }
        jobs.push(json!({ "chunks": chunks }));
    }
    let parsed = common::node(&dir, "proto-parse", &jobs);
    for (i, (answer, batch)) in parsed.iter().zip(expected.chunks(250)).enumerate() {
        assert_eq!(answer.get("error"), None, "(d) body {i}");
        assert_eq!(answer["events"].as_array().unwrap(), batch, "(d) body {i}");
    }

    // And our own frame decoder reads the same bodies.
    let mut body = Vec::new();
    for e in &events {
        encode_frame(e, &mut body).unwrap();
    }
    let mut decoder = FrameDecoder::new();
    let mut back = Vec::new();
    for chunk in body.chunks(997) {
        decoder.push(chunk, &mut back).unwrap();
    }
    decoder.finish().unwrap();
    assert_eq!(back.len(), events.len());
    for (a, b) in back.iter().zip(&events) {
        assert_eq!(
            one_zero_view(&serde_json::to_value(a).unwrap()),
            one_zero_view(&serde_json::to_value(b).unwrap())
        );
    }
    println!(
        "proto: {} events — (a) decoded by @ag-ui/proto identically, (b) {exact} byte-identical ({skipped_1_1} carry 1.1-only encryptedValueType), (c) their bytes decoded identically, (d) {} randomly split bodies parsed by @ag-ui/client identically",
        events.len(),
        jobs.len()
    );
}
