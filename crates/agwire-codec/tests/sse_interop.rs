//! The SSE binding against the official SDKs:
//!
//! - `@ag-ui/client`'s `parseSSEStream` reads our encoder's output, split at
//!   random boundaries, into exactly the events we encoded;
//! - our decoder reads `@ag-ui/encoder`'s output into the same events, and our
//!   encoder writes the same bytes;
//! - on arbitrary LF-framed bodies (comments, fields, multi-line and pretty
//!   JSON, BOM, invalid UTF-8, extra blank lines, unterminated last block,
//!   broken JSON), split at random, our decoder and `parseSSEStream` yield the
//!   same events and fail at the same event;
//! - both refuse an event past the 10 MiB limit and accept one below it.
//!
//! Seeds are printed; `AGWIRE_SSE_SEED` replaces them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;

use agwire_codec::sse::{SseDecoder, SseEncoder, SseEventDecoder};
use agwire_core::Event;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const SEED: u64 = 0x55E_2026;

fn seed(offset: u64) -> u64 {
    let base = std::env::var("AGWIRE_SSE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED);
    let seed = base.wrapping_add(offset);
    println!("sse: seed {seed:#x} (AGWIRE_SSE_SEED to change the base {base:#x})");
    seed
}

fn split_randomly(bytes: &[u8], rng: &mut StdRng) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = match rng.random_range(0..4) {
            0 => 1,
            1 => rng.random_range(1..8),
            2 => rng.random_range(1..200),
            _ => rng.random_range(1..5000),
        };
        let end = (at + len).min(bytes.len());
        chunks.push(bytes[at..end].to_vec());
        at = end;
    }
    chunks
}

fn b64_chunks(chunks: &[Vec<u8>]) -> Vec<String> {
    chunks.iter().map(|c| common::b64(c)).collect()
}

#[test]
fn official_client_parses_our_sse() {
    let Some(dir) = common::interop_dir() else {
        return;
    };
    let seed = seed(0);
    let events = common::sample_events(seed, 3000);
    let mut rng = StdRng::seed_from_u64(seed);
    let encoder = SseEncoder::new();
    // 30 bodies of 100 events each, each split differently, with what a
    // resumable stream adds (ids, keep-alives, retry) mixed in.
    let mut jobs = Vec::new();
    let mut expected = Vec::new();
    let mut id = 0u64;
    for batch in events.chunks(100) {
        let mut body = Vec::new();
        for e in batch {
            match rng.random_range(0..10) {
                0 => encoder.keep_alive(&mut body),
                1 => encoder.comment("line\nbreak \r and \r\n more", &mut body),
                2 => encoder.retry(rng.random_range(0..10_000), &mut body),
                _ => {}
            }
            if rng.random_bool(0.5) {
                id += 1;
                encoder.encode_with_id(id, e, &mut body);
            } else {
                encoder.encode(e, &mut body);
            }
        }
        jobs.push(json!({ "chunks": b64_chunks(&split_randomly(&body, &mut rng)) }));
        expected.push(
            batch
                .iter()
                .map(|e| serde_json::to_value(e).unwrap())
                .collect::<Vec<_>>(),
        );
    }
    let answers = common::node(&dir, "sse-parse", &jobs);
    for (i, (answer, want)) in answers.iter().zip(&expected).enumerate() {
        assert_eq!(answer.get("error"), None, "body {i} (seed {seed:#x})");
        assert_eq!(
            answer["events"].as_array().unwrap(),
            want,
            "body {i} (seed {seed:#x})"
        );
    }
    println!(
        "sse: @ag-ui/client parsed {} events from {} randomly split bodies identically",
        events.len(),
        jobs.len()
    );
}

#[test]
fn we_parse_the_official_encoders_sse() {
    let Some(dir) = common::interop_dir() else {
        return;
    };
    let seed = seed(1);
    let events = common::sample_events(seed, 3000);
    let jobs: Vec<Value> = events.iter().map(|e| json!({ "event": e })).collect();
    let answers = common::node(&dir, "sse-encode", &jobs);
    let mut body = Vec::new();
    let mut identical = 0;
    for (a, e) in answers.iter().zip(&events) {
        let theirs = common::unb64(a["sse"].as_str().expect("sse"));
        // Key order is the producer's; ours reaches them through JSON.parse,
        // which keeps it, so the frames are byte-identical.
        assert_eq!(
            String::from_utf8_lossy(&theirs),
            String::from_utf8_lossy(&SseEncoder::new().to_bytes(e)),
            "@ag-ui/encoder and we frame {e} differently"
        );
        identical += 1;
        body.extend(theirs);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut decoder = SseEventDecoder::new();
    let mut decoded = Vec::new();
    for chunk in split_randomly(&body, &mut rng) {
        decoder.push(&chunk, &mut decoded).unwrap();
    }
    decoder.finish(&mut decoded).unwrap();
    assert_eq!(decoded, events);
    println!(
        "sse: decoded {} events of @ag-ui/encoder output identically; {identical} frames byte-identical to ours",
        events.len()
    );
}

/// Arbitrary LF-framed bodies, as any producer might write them.
#[test]
fn arbitrary_bodies_parse_alike() {
    let Some(dir) = common::interop_dir() else {
        return;
    };
    let seed = seed(2);
    let mut rng = StdRng::seed_from_u64(seed);
    let pool = common::sample_events(seed, 600);
    let mut jobs = Vec::new();
    let mut ours = Vec::new();
    let mut failing = 0;
    for _ in 0..400 {
        let body = arbitrary_body(&mut rng, &pool);
        let chunks = split_randomly(&body, &mut rng);
        let (events, failed) = our_parse(&chunks);
        failing += usize::from(failed);
        ours.push((events, failed, body));
        jobs.push(json!({ "chunks": b64_chunks(&chunks) }));
    }
    let answers = common::node(&dir, "sse-parse", &jobs);
    let mut events_seen = 0;
    for (i, (answer, (events, failed, body))) in answers.iter().zip(&ours).enumerate() {
        let theirs = answer["events"].as_array().unwrap();
        let context = || {
            format!(
                "body {i} (seed {seed:#x}): {:?}\nours: {events:?} failed={failed}\ntheirs: {answer}",
                String::from_utf8_lossy(body)
            )
        };
        assert_eq!(theirs, events, "{}", context());
        assert_eq!(answer.get("error").is_some(), *failed, "{}", context());
        events_seen += events.len();
    }
    // The bodies must exercise both outcomes, or half the claim is untested.
    assert!(
        failing > 20 && failing < 200,
        "{failing} of 400 bodies failed"
    );
    println!(
        "sse: 400 arbitrary bodies ({events_seen} events, {failing} failing): our decoder and parseSSEStream agree"
    );
}

/// Our decoder's reading of a body, as parseSSEStream reports it: the JSON of
/// each event up to the first failure, and whether there was one.
fn our_parse(chunks: &[Vec<u8>]) -> (Vec<Value>, bool) {
    let mut frames = SseDecoder::new();
    let mut out = Vec::new();
    for c in chunks {
        frames.push(c, &mut out).unwrap();
    }
    frames.finish(&mut out).unwrap();
    let mut values = Vec::new();
    for f in &out {
        match serde_json::from_str::<Value>(&f.data) {
            Ok(v) => values.push(v),
            Err(_) => return (values, true),
        }
    }
    // Every payload the generator writes as JSON is an AG-UI event; the event
    // layer must read the same events from the same chunks.
    let mut events = SseEventDecoder::new();
    let mut decoded = Vec::new();
    for c in chunks {
        events.push(c, &mut decoded).unwrap();
    }
    events.finish(&mut decoded).unwrap();
    let decoded: Vec<Value> = decoded
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(decoded, values, "event layer differs from the frames");
    (values, false)
}

/// Lines that are neither data nor blank, and that both parsers ignore.
const NOISE: &[&str] = &[
    ": comment",
    ":",
    ":data: {\"not\":\"data\"}",
    "event: message",
    "event: custom",
    "event:",
    "id: 42",
    "id:",
    "id: \u{0}x",
    "retry: 1000",
    "retry: x",
    "foo: bar",
    "datax: 1",
    "data : 1",
    " data: 1",
    "DATA: 1",
    "Data: 1",
];

/// Bytes that go inside a JSON string: valid UTF-8 of every width and invalid
/// sequences, which both sides must read as the same U+FFFDs.
const STRING_BYTES: &[&[u8]] = &[
    b"plain",
    b" ",
    "é".as_bytes(),
    "日本".as_bytes(),
    "🌍".as_bytes(),
    "\u{2028}".as_bytes(),
    "\u{feff}".as_bytes(),
    b"\\n",
    b"\\r\\n",
    b"\\\"",
    b"\\u00e9",
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x8c",
    b"\xed\xa0\x80",
    b"\xc0\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\x80\x80",
];

fn arbitrary_body(rng: &mut StdRng, pool: &[Event]) -> Vec<u8> {
    let mut body = Vec::new();
    if rng.random_ratio(1, 10) {
        body.extend_from_slice(b"\xEF\xBB\xBF");
    }
    let blocks = rng.random_range(1..12);
    for b in 0..blocks {
        let last = b + 1 == blocks;
        match rng.random_range(0..20) {
            // No event: comments and fields only.
            0 | 1 => {
                for _ in 0..rng.random_range(1..4) {
                    line(&mut body, NOISE.choose(rng).unwrap().as_bytes());
                }
            }
            // Broken JSON: both must stop here.
            2 if rng.random_ratio(1, 4) => line(&mut body, b"data: {\"type\":\"RAW\",\"event\":"),
            // `data:` alone: JSON.parse("") throws; so do we.
            3 if rng.random_ratio(1, 4) => line(&mut body, b"data:"),
            // A hand-written event with raw bytes in a string.
            4..=7 => {
                let mut json =
                    b"{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"".to_vec();
                for _ in 0..rng.random_range(1..6) {
                    json.extend_from_slice(STRING_BYTES.choose(rng).unwrap());
                }
                json.extend_from_slice(b"\"}");
                data_block(rng, &mut body, &[json]);
            }
            // A generated event, compact or pretty (one data line per line).
            _ => {
                let event = pool.choose(rng).unwrap();
                let lines: Vec<Vec<u8>> = if rng.random_bool(0.3) {
                    serde_json::to_string_pretty(event)
                        .unwrap()
                        .lines()
                        .map(|l| l.as_bytes().to_vec())
                        .collect()
                } else {
                    vec![serde_json::to_vec(event).unwrap()]
                };
                data_block(rng, &mut body, &lines);
            }
        }
        // Block end: usually a blank line, sometimes more; the last block may
        // end the body without one.
        if last && rng.random_bool(0.3) {
            if body.ends_with(b"\n") && rng.random_bool(0.5) {
                body.pop();
            }
        } else {
            let blank_lines = if rng.random_ratio(1, 5) { 3 } else { 1 };
            let n = rng.random_range(1..=blank_lines);
            body.extend(std::iter::repeat_n(b'\n', n));
        }
    }
    body
}

/// Data lines, with `data:` or `data: ` prefixes, noise lines and bare `data`
/// lines (an empty data line — only where other data lines make it harmless
/// JSON whitespace, since the official parser ignores it) interleaved.
fn data_block(rng: &mut StdRng, body: &mut Vec<u8>, lines: &[Vec<u8>]) {
    for (i, text) in lines.iter().enumerate() {
        if rng.random_ratio(1, 6) {
            line(body, NOISE.choose(rng).unwrap().as_bytes());
        }
        if i > 0 && rng.random_ratio(1, 10) {
            line(body, b"data");
        }
        let mut l = if rng.random_bool(0.5) {
            b"data: ".to_vec()
        } else {
            b"data:".to_vec()
        };
        l.extend_from_slice(text);
        line(body, &l);
    }
    if rng.random_ratio(1, 6) {
        line(body, NOISE.choose(rng).unwrap().as_bytes());
    }
}

fn line(body: &mut Vec<u8>, text: &[u8]) {
    body.extend_from_slice(text);
    body.push(b'\n');
}

#[test]
fn both_refuse_an_event_past_ten_mebibytes() {
    let Some(dir) = common::interop_dir() else {
        return;
    };
    let frame = |n: usize| {
        let mut body =
            b"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"".to_vec();
        body.resize(body.len() + n, b'x');
        body.extend_from_slice(b"\"}\n\n");
        body
    };
    let mib = 1024 * 1024;
    let bodies = [frame(9 * mib), frame(11 * mib)];
    let jobs: Vec<Value> = bodies
        .iter()
        .map(|b| {
            let chunks: Vec<Vec<u8>> = b.chunks(64 * 1024).map(<[u8]>::to_vec).collect();
            json!({ "chunks": b64_chunks(&chunks) })
        })
        .collect();
    let answers = common::node(&dir, "sse-parse", &jobs);
    let mut verdicts = Vec::new();
    for (body, answer) in bodies.iter().zip(&answers) {
        let mut d = SseEventDecoder::new();
        let mut out = Vec::new();
        let ours = body
            .chunks(64 * 1024)
            .try_for_each(|c| d.push(c, &mut out))
            .and_then(|()| d.finish(&mut out));
        let theirs = answer.get("error").and_then(Value::as_str);
        verdicts.push((ours.is_ok(), theirs.is_none()));
        if let Some(why) = theirs {
            assert!(why.contains("SSE buffer size exceeded"), "{why}");
        }
    }
    assert_eq!(verdicts, [(true, true), (false, false)]);
    println!("sse: a 9 MiB event passes and an 11 MiB one is refused, by both");
}

/// The differences the module documentation claims, checked against the
/// official parser so the claim cannot go stale.
#[test]
fn documented_differences_hold() {
    let Some(dir) = common::interop_dir() else {
        return;
    };
    let a = r#"{"type":"STEP_STARTED","stepName":"a"}"#;
    let b = r#"{"type":"STEP_FINISHED","stepName":"a"}"#;
    // (body, what we read, whether we fail, what the official parser reads, whether it fails)
    let cases: Vec<(String, usize, bool, usize, bool)> = vec![
        // CRLF framing: one unsplittable block there, two events here.
        (
            format!("data: {a}\r\n\r\ndata: {b}\r\n\r\n"),
            2,
            false,
            0,
            true,
        ),
        // A single CRLF event still parses there (JSON allows the CR).
        (format!("data: {a}\r\n\r\n"), 1, false, 1, false),
        // CR framing.
        (format!("data: {a}\r\rdata: {b}\r\r"), 2, false, 0, true),
        // A block of a bare `data` line: no event there, empty data here.
        (format!("data\n\ndata: {a}\n\n"), 0, true, 1, false),
        // `data:` alone fails in both.
        (format!("data:\n\ndata: {a}\n\n"), 0, true, 0, true),
    ];
    let jobs: Vec<Value> = cases
        .iter()
        .map(|(body, ..)| json!({ "chunks": [common::b64(body.as_bytes())] }))
        .collect();
    let answers = common::node(&dir, "sse-parse", &jobs);
    for ((body, ours_n, ours_fail, theirs_n, theirs_fail), answer) in cases.iter().zip(&answers) {
        let mut d = SseEventDecoder::new();
        let mut out = Vec::new();
        let r = d
            .push(body.as_bytes(), &mut out)
            .and_then(|()| d.finish(&mut out));
        assert_eq!(
            (out.len(), r.is_err()),
            (*ours_n, *ours_fail),
            "ours: {body:?}"
        );
        assert_eq!(
            (
                answer["events"].as_array().unwrap().len(),
                answer.get("error").is_some()
            ),
            (*theirs_n, *theirs_fail),
            "parseSSEStream: {body:?}: {answer}"
        );
    }
    println!(
        "sse: the {} documented differences from parseSSEStream hold",
        cases.len()
    );
}
