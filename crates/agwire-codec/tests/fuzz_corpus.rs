//! Replays the fuzz corpora (`fuzz/corpus/<target>/`) through the same checks
//! the fuzz targets run, so every input the fuzzer found interesting — and any
//! crash it found and we fixed — stays a regression test on stable Rust.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::PathBuf;

use agwire_testkit::fuzz_checks as checks;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "empty corpus for {target}");
    for f in &files {
        let data = std::fs::read(f).unwrap();
        let outcome = std::panic::catch_unwind(|| check(&data));
        assert!(outcome.is_ok(), "{target}: {} fails its check", f.display());
    }
    println!("{target}: {} corpus inputs replayed", files.len());
}

#[test]
fn json_event_corpus() {
    replay("json_event", checks::json_event);
}

#[test]
fn sse_decoder_corpus() {
    replay("sse_decoder", checks::sse_decoder);
}

#[test]
fn frame_decoder_corpus() {
    replay("frame_decoder", checks::frame_decoder);
}
