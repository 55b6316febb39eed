//! `fixtures/null-omission.json`: every case round-trips to its expected JSON.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;

use agwire_core::{DecodeMode, Event, decode::decode};

#[test]
fn null_omission_fixture_round_trips() {
    let Some(dir) = common::spec_dir() else {
        return;
    };
    let fixture = common::read_json(&dir.join("fixtures/null-omission.json"));
    let cases = fixture["stream"].as_array().expect("cases");
    assert!(cases.len() >= 28, "fixture shrank: {}", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let event = match decode::<Event>(case["input"].clone(), DecodeMode::Lenient) {
            Ok(d) => d.value,
            Err(e) => {
                failures.push(format!("{name}: decode failed: {e}"));
                continue;
            }
        };
        let produced: serde_json::Value = serde_json::from_str(&event.to_json()).unwrap();
        if produced != case["expected"] {
            failures.push(format!(
                "{name}:\n  produced {produced}\n  expected {}",
                case["expected"]
            ));
        }
    }
    println!(
        "null-omission: {}/{} cases round-trip",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn agent_capabilities_fixture_round_trips() {
    let Some(dir) = common::spec_dir() else {
        return;
    };
    let fixture = common::read_json(&dir.join("fixtures/agent-capabilities.json"));
    let cases = fixture["cases"].as_array().expect("cases");
    for case in cases {
        let caps =
            decode::<agwire_core::AgentCapabilities>(case["input"].clone(), DecodeMode::Strict)
                .unwrap_or_else(|e| panic!("{}: {e}", case["name"]))
                .value;
        assert_eq!(
            serde_json::to_value(&caps).unwrap(),
            case["expected"],
            "{}",
            case["name"]
        );
    }
}
