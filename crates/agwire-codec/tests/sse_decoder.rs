//! The incremental SSE decoder against an independent, whole-body model of the
//! WHATWG event-stream rules: the body is first decoded to text (one BOM
//! stripped, invalid UTF-8 as U+FFFD, as `TextDecoder` does), then cut into
//! lines at CRLF, CR or LF, then read field by field. The decoder never sees
//! the body whole, never decodes text before framing, and is fed in chunks
//! split anywhere — inside a UTF-8 character, between CR and LF, inside a BOM.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use agwire_codec::Error;
use agwire_codec::sse::{SseDecoder, SseEncoder, SseEventDecoder, SseFrame};
use agwire_core::Event;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

const SEED: u64 = 0xDEC0_DE55;

/// What a decoder makes of a whole body: its frames, last event id and retry.
type Reading = (Vec<SseFrame>, Option<String>, Option<u64>);

/// The WHATWG algorithm, written as the spec reads, over the whole body; plus
/// the official client's rule that an unterminated last block is dispatched.
fn model(body: &[u8]) -> Reading {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let text = String::from_utf8_lossy(body);
    let mut lines = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                lines.push(std::mem::take(&mut current));
            }
            '\n' => lines.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    // The end of the body acts as a blank line.
    lines.push(String::new());

    let mut frames = Vec::new();
    let (mut data, mut event, mut id_buffer) = (String::new(), String::new(), String::new());
    let (mut last_id, mut retry, mut block_retry) = (String::new(), None, None);
    for line in lines {
        if line.is_empty() {
            last_id.clone_from(&id_buffer);
            if data.is_empty() {
                event.clear();
                block_retry = None;
                continue;
            }
            data.pop(); // the trailing LF
            let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
            frames.push(SseFrame {
                data: std::mem::take(&mut data),
                event: non_empty(&event),
                id: non_empty(&last_id),
                retry: block_retry.take(),
            });
            event.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match field {
            "data" => {
                data.push_str(value);
                data.push('\n');
            }
            "event" => value.clone_into(&mut event),
            "id" if !value.contains('\0') => value.clone_into(&mut id_buffer),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    retry = Some(ms);
                    block_retry = Some(ms);
                }
            }
            _ => {}
        }
    }
    let last = (!last_id.is_empty()).then_some(last_id);
    (frames, last, retry)
}

fn incremental(chunks: &[&[u8]], limit: usize) -> (Result<(), String>, Reading) {
    let mut d = SseDecoder::with_max_event_size(limit);
    let mut out = Vec::new();
    let r = chunks
        .iter()
        .try_for_each(|c| d.push(c, &mut out))
        .and_then(|()| d.finish(&mut out))
        .map_err(|e| e.to_string());
    let id = d.last_event_id().map(str::to_owned);
    (r, (out, id, d.retry()))
}

/// Line starts: field names with and without colons and spaces, comments.
const FIELDS: &[&[u8]] = &[
    b"data",
    b"data:",
    b"data: ",
    b"data: ",
    b"data: ",
    b"data:  ",
    b"id",
    b"id: ",
    b"id:",
    b"event: ",
    b"event:",
    b"retry: ",
    b"retry:",
    b"retry: 1500",
    b"retry:0",
    b":",
    b": ",
    b" data: ",
    b"dat",
    b"",
];

/// Line contents: text, digits, multi-byte characters, invalid UTF-8, NUL,
/// BOMs and colons.
const VALUES: &[&[u8]] = &[
    b" ",
    b"x",
    b":",
    b"{\"a\":1}",
    b"12",
    b"0",
    b"-",
    b"\0",
    "é".as_bytes(),
    "日本".as_bytes(),
    "🌍".as_bytes(),
    "\u{2028}".as_bytes(),
    b"\xEF\xBB\xBF",
    b"\xEF\xBB",
    b"\xff",
    b"\xe2\x82",
    b"\xf0\x9f",
    b"\x80",
    b"\xed\xa0\x80",
];

/// Line ends of every kind, and runs of them.
const EOLS: &[&[u8]] = &[
    b"\n",
    b"\n",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"\n\n",
    b"\r\r",
    b"\r\n\r\n",
    b"\n\r",
    b"",
];

fn random_body(rng: &mut StdRng) -> Vec<u8> {
    let mut body = Vec::new();
    if rng.random_ratio(1, 5) {
        body.extend_from_slice(b"\xEF\xBB\xBF");
    }
    for _ in 0..rng.random_range(0..25) {
        body.extend_from_slice(FIELDS.choose(rng).unwrap());
        for _ in 0..rng.random_range(0..4) {
            body.extend_from_slice(VALUES.choose(rng).unwrap());
        }
        body.extend_from_slice(EOLS.choose(rng).unwrap());
    }
    body
}

fn random_split<'a>(body: &'a [u8], rng: &mut StdRng) -> Vec<&'a [u8]> {
    let mut chunks = Vec::new();
    let mut at = 0;
    while at < body.len() {
        // Empty chunks too: they must change nothing.
        let max = if rng.random_bool(0.5) { 3 } else { 40 };
        let len = rng.random_range(0..=max);
        let end = (at + len).min(body.len());
        chunks.push(&body[at..end]);
        at = end;
    }
    chunks
}

#[test]
fn random_bodies_read_as_the_model_reads_them() {
    let mut rng = StdRng::seed_from_u64(SEED);
    println!("sse_decoder: seed {SEED:#x}");
    let (mut frames, mut ids, mut retries) = (0, 0, 0);
    for case in 0..3000 {
        let body = random_body(&mut rng);
        let want = model(&body);
        let (r, whole) = incremental(&[&body], usize::MAX);
        r.unwrap();
        assert_eq!(
            whole,
            want,
            "case {case}: {:?}",
            String::from_utf8_lossy(&body)
        );
        for _ in 0..4 {
            let chunks = random_split(&body, &mut rng);
            let (r, split) = incremental(&chunks, usize::MAX);
            r.unwrap();
            assert_eq!(split, want, "case {case}: chunks {chunks:?}");
        }
        frames += want.0.len();
        ids += usize::from(want.1.is_some());
        retries += usize::from(want.2.is_some());
    }
    // The bodies must produce frames, ids and retries, or the model says little.
    assert!(
        frames > 5_000 && ids > 500 && retries > 300,
        "{frames} frames, {ids} ids, {retries} retries"
    );
    println!(
        "sse_decoder: 3000 random bodies x 5 chunkings ({frames} frames; {ids} end with an id, {retries} with a retry) read as the model reads them"
    );
}

#[test]
fn every_split_of_a_unicode_stream() {
    let mut body = Vec::new();
    let encoder = SseEncoder::new();
    let events: Vec<Event> = [
        "é",
        "日本語",
        "🌍🚀",
        "a\nb\r\nc",
        "\u{2028}\u{feff}",
        "\u{10ffff}",
    ]
    .iter()
    .map(|delta| {
        Event::from_value(serde_json::json!({
            "type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta
        }))
        .unwrap()
        .value
    })
    .collect();
    for (i, e) in events.iter().enumerate() {
        encoder.encode_with_id(i as u64, e, &mut body);
    }
    let decode = |chunks: &[&[u8]]| {
        let mut d = SseEventDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.push(c, &mut out).unwrap();
        }
        d.finish(&mut out).unwrap();
        (out, d.last_event_id().map(str::to_owned))
    };
    let want = (events.clone(), Some("5".to_owned()));
    assert_eq!(decode(&[&body]), want);
    for i in 0..=body.len() {
        assert_eq!(decode(&[&body[..i], &body[i..]]), want, "split at {i}");
    }
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(decode(&bytes), want, "one byte at a time");
    // And as CRLF and CR framing, byte by byte.
    for eol in [&b"\r\n"[..], b"\r"] {
        let mut other = Vec::new();
        for b in &body {
            if *b == b'\n' {
                other.extend_from_slice(eol);
            } else {
                other.push(*b);
            }
        }
        let bytes: Vec<&[u8]> = other.chunks(1).collect();
        assert_eq!(decode(&bytes), want, "{eol:?} one byte at a time");
        for i in 0..=other.len() {
            assert_eq!(
                decode(&[&other[..i], &other[i..]]),
                want,
                "{eol:?} split at {i}"
            );
        }
    }
}

#[test]
fn the_size_limit_does_not_depend_on_chunking() {
    let mut rng = StdRng::seed_from_u64(SEED + 1);
    let (mut refused, mut accepted) = (0, 0);
    for case in 0..3000 {
        let body = random_body(&mut rng);
        let limit = rng.random_range(1..40);
        let (r, whole) = incremental(&[&body], limit);
        match &r {
            Ok(()) => {
                accepted += 1;
                assert_eq!(whole, model(&body), "case {case}: limit {limit}");
            }
            Err(e) => {
                refused += 1;
                assert_eq!(*e, Error::SseEventTooLarge { limit }.to_string());
            }
        }
        for _ in 0..3 {
            let chunks = random_split(&body, &mut rng);
            let split = incremental(&chunks, limit);
            // Same verdict, and the same frames delivered before it.
            assert_eq!(split.0, r, "case {case}: limit {limit}, chunks {chunks:?}");
            assert_eq!(
                split.1.0, whole.0,
                "case {case}: limit {limit}, chunks {chunks:?}"
            );
        }
    }
    assert!(
        refused > 300 && accepted > 300,
        "{refused} refused, {accepted} accepted"
    );
    println!(
        "sse_decoder: limits: {refused} bodies refused and {accepted} accepted alike under every chunking"
    );
}

#[test]
fn nothing_buffered_outgrows_the_limit() {
    // A peer that never ends its line, or its event, cannot make the decoder
    // hold more than the limit.
    let limit = 1024;
    for body in [
        vec![b'x'; 10_000],
        b"data: "
            .iter()
            .chain([b'x'; 10_000].iter())
            .copied()
            .collect(),
        b"data: x\n".repeat(2_000),
        b": comment that never ends ".repeat(500),
    ] {
        let mut d = SseDecoder::with_max_event_size(limit);
        let mut out = Vec::new();
        let r = body.chunks(7).try_for_each(|c| d.push(c, &mut out));
        let r = r.and_then(|()| d.finish(&mut out));
        assert!(matches!(r, Err(Error::SseEventTooLarge { limit: 1024 })));
        assert!(out.is_empty());
    }
    // Many small events are not one big one.
    let mut d = SseDecoder::with_max_event_size(limit);
    let mut out = Vec::new();
    d.push(&b"data: x\n\n".repeat(2_000), &mut out).unwrap();
    assert_eq!(out.len(), 2_000);
}
