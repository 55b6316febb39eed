//! Shared helpers: the official peers and data.
#![allow(
    dead_code,
    unreachable_pub,
    unused_imports,
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::print_stderr
)]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use base64::Engine as _;

use agwire_testkit::peers;
pub use agwire_testkit::peers::{interop_dir, spec_dir};
use serde_json::Value;

/// The official spec data; missing, a skip announced loudly — or, under
/// `AGWIRE_REQUIRE_INTEROP=1` (set by `scripts/test`, so in CI), a failure, as
/// a missing peer is.
pub fn require_spec_dir() -> Option<PathBuf> {
    let dir = spec_dir();
    if dir.is_none() && std::env::var("AGWIRE_REQUIRE_INTEROP").as_deref() == Ok("1") {
        panic!("the AG-UI spec data is missing (set AGUI_SPEC_DIR) and AGWIRE_REQUIRE_INTEROP=1");
    }
    dir
}

/// Every event of the official schema fixtures (`draft/fixtures/*Event/valid`).
pub fn fixture_events() -> Vec<agwire_core::Event> {
    let Some(dir) = require_spec_dir() else {
        return Vec::new();
    };
    let root = dir.join("draft/fixtures");
    let mut out = Vec::new();
    let mut defs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    defs.sort();
    for def in defs {
        if !def
            .file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with("Event")
        {
            continue;
        }
        let mut files: Vec<_> = std::fs::read_dir(def.join("valid"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            out.push(agwire_core::Event::from_value(v).unwrap().value);
        }
    }
    assert!(
        !out.is_empty(),
        "no fixture events under {}",
        root.display()
    );
    out
}

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

/// Runs `interop/codec.mjs <mode>` over `jobs`, one answer per job.
pub fn node(dir: &std::path::Path, mode: &str, jobs: &[Value]) -> Vec<Value> {
    let mut command = Command::new("node");
    command
        .arg(dir.join("codec.mjs"))
        .arg(mode)
        .current_dir(dir);
    let input: String = jobs.iter().map(|j| format!("{j}\n")).collect();
    let (answers, err) = peers::json_lines(command, input);
    assert_eq!(answers.len(), jobs.len(), "codec.mjs {mode}: {err}");
    answers
}

/// Known events of the generator's valid streams, as JSON, plus awkward text.
pub fn sample_events(seed: u64, want: usize) -> Vec<agwire_core::Event> {
    use agwire_testkit::streamgen::{StreamClass, generate};
    let mut out = Vec::new();
    for text in [
        "",
        "é",
        "🌍 emoji",
        "line\nbreak",
        "tab\tand \"quotes\"",
        "\u{2028}\u{2029}",
        "\u{0}\u{1f}",
        "日本語テキスト",
    ] {
        out.push(
            agwire_core::Event::from_value(serde_json::json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": text, "delta": text}))
                .unwrap()
                .value,
        );
    }
    let mut index = 0;
    while out.len() < want {
        let stream = generate(seed, index);
        index += 1;
        if !matches!(stream.class, StreamClass::Valid) {
            continue;
        }
        for raw in stream.events {
            if let Ok(d) = agwire_core::Event::from_value(raw)
                && !matches!(d.value, agwire_core::Event::Unknown(_))
                && d.warnings.is_empty()
            {
                out.push(d.value);
            }
        }
    }
    out.truncate(want);
    out
}
