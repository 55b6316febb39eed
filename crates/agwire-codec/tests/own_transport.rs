//! The `own_transport` example, run: every official conformance stream as
//! SSE bytes cut at random places (inside events, inside UTF-8 characters),
//! read through the example's decoder and pipeline; it must end as the
//! fixture says the official client ends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Read;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::common;

#[allow(dead_code)]
#[path = "../examples/own_transport.rs"]
mod example;

/// A reader handing out its bytes in random small pieces, as a network does.
struct Pieces {
    bytes: Vec<u8>,
    at: usize,
    rng: StdRng,
}

impl Read for Pieces {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.bytes.len() - self.at;
        let n = left.min(buf.len()).min(self.rng.random_range(1..=17));
        buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn sse(stream: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for event in stream {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(event.to_string().as_bytes());
        out.extend_from_slice(b"\n\n");
    }
    out
}

#[test]
fn the_example_ends_every_conformance_stream_as_the_official_client_does() {
    let Some(dir) = common::require_spec_dir() else {
        return;
    };
    let seed = std::env::var("AGWIRE_OWN_TRANSPORT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random::<u64>());
    println!("own_transport: seed {seed} (AGWIRE_OWN_TRANSPORT_SEED to repeat)");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut paths: Vec<_> = std::fs::read_dir(dir.join("1.1/conformance/streams"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let (mut completed, mut failed) = (0, 0);
    for path in paths {
        let fixture = agwire_testkit::peers::read_json(&path);
        let name = fixture["name"].as_str().unwrap_or_default().to_owned();
        // Fixtures that set the consumer up (its input, its peer's
        // version) are for the core suite: the example is a new consumer.
        if fixture.get("client").is_some() || fixture.get("input").is_some() {
            continue;
        }
        // The TypeScript client's reading, where the fixture has one.
        let mut expect = fixture["expect"].clone();
        if let Some(Value::Object(overrides)) = fixture.pointer("/expectOverrides/typescript") {
            for (key, value) in overrides {
                expect[key] = value.clone();
            }
        }
        let bytes = sse(fixture["stream"].as_array().unwrap());
        let reader = Pieces {
            bytes,
            at: 0,
            rng: StdRng::seed_from_u64(rng.random()),
        };
        let mut printed = Vec::new();
        let result = example::follow(reader, &mut printed);
        match expect["outcome"].as_str() {
            Some("completed") => {
                // Completed: the stream is accepted to its end (its last run
                // may still have ended in RUN_ERROR).
                let session = result.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(session.last_run.is_some(), "{name}: no run");
                if let Some(count) = expect["messageCount"].as_u64() {
                    assert_eq!(session.messages.len() as u64, count, "{name}");
                }
                if let Some(state) = expect.get("state") {
                    assert_eq!(&session.state, state, "{name}");
                }
                // What was printed is every text delta the stream carried,
                // as it came (snapshots may rewrite the messages later).
                let deltas: String = fixture["stream"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|e| {
                        matches!(
                            e["type"].as_str(),
                            Some("TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_CHUNK")
                        )
                    })
                    .filter_map(|e| e["delta"].as_str())
                    .collect();
                assert_eq!(String::from_utf8(printed).unwrap(), deltas, "{name}");
                completed += 1;
            }
            Some("failed") => {
                let error = match result {
                    Err(error) => error.to_string(),
                    Ok(session) => panic!("{name}: accepted, ending {:?}", session.last_run),
                };
                // The official client's messages are JSON-escaped: `\"` is `"`.
                if let Some(part) = expect["errorContains"].as_str() {
                    let part = part.replace("\\\"", "\"");
                    assert!(error.contains(&part), "{name}: {error} lacks {part:?}");
                }
                failed += 1;
            }
            _ => {}
        }
    }
    println!("own_transport: {completed} streams completed, {failed} refused as expected");
    // The fixtures hold both kinds: neither check may pass empty.
    assert!(completed >= 10 && failed >= 10, "{completed} / {failed}");
}
