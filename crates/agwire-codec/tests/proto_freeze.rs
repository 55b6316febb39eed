//! Every slot of `proto/ag_ui.proto` against the official wire freeze
//! (`1.1/proto-freeze.txt` in the spec data): each frozen field, oneof member
//! and enum value exists here with the same number, and nothing here has a
//! number the freeze does not give it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use prost_types::{DescriptorProto, EnumDescriptorProto};

/// `Message.field`, `Message.oneof.field`, `Outer.Inner.field` and
/// `Enum.VALUE`, as the freeze names them.
fn our_slots() -> BTreeMap<String, i32> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let fds = protox::compile([root.join("proto/ag_ui.proto")], [root.join("proto")])
        .expect("proto compiles");
    let file = fds
        .file
        .iter()
        .find(|f| f.package() == "ag_ui")
        .expect("the ag_ui file");
    let mut out = BTreeMap::new();
    for e in &file.enum_type {
        enum_slots("", e, &mut out);
    }
    for m in &file.message_type {
        message_slots("", m, &mut out);
    }
    out
}

fn enum_slots(prefix: &str, e: &EnumDescriptorProto, out: &mut BTreeMap<String, i32>) {
    for v in &e.value {
        out.insert(format!("{prefix}{}.{}", e.name(), v.name()), v.number());
    }
}

fn message_slots(prefix: &str, m: &DescriptorProto, out: &mut BTreeMap<String, i32>) {
    let name = format!("{prefix}{}", m.name());
    for f in &m.field {
        // A real oneof's members are named through it; proto3 `optional`
        // makes a synthetic oneof that is no part of the wire's names.
        let oneof = f
            .oneof_index
            .filter(|_| !f.proto3_optional())
            .map(|i| m.oneof_decl[usize::try_from(i).unwrap()].name());
        let key = match oneof {
            Some(oneof) => format!("{name}.{oneof}.{}", f.name()),
            None => format!("{name}.{}", f.name()),
        };
        out.insert(key, f.number());
    }
    for nested in &m.nested_type {
        message_slots(&format!("{name}."), nested, out);
    }
    for e in &m.enum_type {
        enum_slots(&format!("{name}."), e, out);
    }
}

fn frozen_slots(text: &str) -> BTreeMap<String, i32> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (slot, number) = line
            .split_once(" = ")
            .unwrap_or_else(|| panic!("proto-freeze.txt line {}: {line:?}", n + 1));
        let number: i32 = number
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("proto-freeze.txt line {}: {line:?}", n + 1));
        assert!(
            out.insert(slot.trim().to_owned(), number).is_none(),
            "proto-freeze.txt names {slot} twice"
        );
    }
    out
}

#[test]
fn every_slot_matches_the_freeze() {
    let Some(dir) = common::require_spec_dir() else {
        return;
    };
    let frozen = frozen_slots(&std::fs::read_to_string(dir.join("1.1/proto-freeze.txt")).unwrap());
    let ours = our_slots();
    let mut wrong = Vec::new();
    for (slot, number) in &frozen {
        match ours.get(slot) {
            Some(n) if n == number => {}
            Some(n) => wrong.push(format!("{slot}: ours {n}, frozen {number}")),
            None => wrong.push(format!("{slot} = {number}: frozen, missing here")),
        }
    }
    for (slot, number) in &ours {
        if !frozen.contains_key(slot) {
            wrong.push(format!("{slot} = {number}: not in the freeze"));
        }
    }
    assert!(
        wrong.is_empty(),
        "ag_ui.proto against proto-freeze.txt:\n{}",
        wrong.join("\n")
    );
    println!("{} slots match proto-freeze.txt", frozen.len());
}

#[test]
fn the_comparison_sees_a_wrong_number() {
    // The check above is only as good as the parsing on both sides.
    let frozen = frozen_slots(
        "# c\n\nEvent.event.run_started = 12\nToolCall.Function.name = 1\nEventType.RAW = 9\n",
    );
    let ours = our_slots();
    assert_eq!(
        ours.get("Event.event.run_started"),
        frozen.get("Event.event.run_started")
    );
    assert_eq!(ours.get("ToolCall.Function.name"), Some(&1));
    assert_eq!(ours.get("EventType.RAW"), Some(&9));
    assert_eq!(
        ours.get("Message.content"),
        Some(&3),
        "optional fields are plain slots"
    );
    assert_ne!(ours.get("Event.event.run_error"), Some(&12));
}
