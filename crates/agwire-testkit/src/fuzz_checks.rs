//! The properties the fuzz targets (`fuzz/fuzz_targets/`, cargo-fuzz) check.
//! Shared with the corpus-replay regression tests
//! (`crates/agwire-codec/tests/fuzz_corpus.rs`), so a crash the fuzzer found
//! stays fixed (feature `fuzz-checks`).

use agwire_core::pipeline::Pipeline;
use agwire_core::{DecodeMode, Event};

/// JSON event decoding never panics; whatever lenient decoding accepts
/// re-encodes to JSON that strict decoding accepts and that decodes back to the
/// same event; the pipeline never panics on it.
pub fn json_event(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let strict = Event::from_json_with(text, DecodeMode::Strict);
    let lenient = Event::from_json(text);
    if let Ok(strict) = &strict {
        // Strict acceptance implies lenient acceptance of the same event.
        let lenient = lenient.as_ref().expect("strict accepted, lenient rejected");
        assert_eq!(
            strict.value, lenient.value,
            "strict and lenient disagree on {text}"
        );
    }
    if let Ok(decoded) = lenient {
        let event = decoded.value;
        if !matches!(event, Event::Unknown(_)) {
            let json = event.to_json();
            let again = Event::from_json_with(&json, DecodeMode::Strict)
                .unwrap_or_else(|e| panic!("our own output {json} fails strict decoding: {e}"));
            assert_eq!(again.value, event, "round trip changed {json}");
        }
        let mut pipeline = Pipeline::new("fuzz", Vec::new(), serde_json::json!({}));
        let _ = pipeline.push(event);
    }
}

/// Splits `data` into chunks at boundaries the input itself chooses: the first
/// byte seeds the chunk sizes, so the fuzzer explores both.
fn chunks(data: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let Some((&seed, body)) = data.split_first() else {
        return (Vec::new(), data);
    };
    let mut out = Vec::new();
    let mut at = 0;
    let mut k = u32::from(seed) | 1;
    while at < body.len() {
        k = k.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let len = 1 + (k >> 16) as usize % 17;
        let end = (at + len).min(body.len());
        out.push(&body[at..end]);
        at = end;
    }
    (out, body)
}

/// The SSE decoder never panics, and how the body is chunked never changes the
/// frames it yields (nor whether it fails).
pub fn sse_decoder(data: &[u8]) {
    use agwire_codec::sse::SseDecoder;
    let (pieces, body) = chunks(data);
    let run = |parts: &[&[u8]]| {
        let mut d = SseDecoder::with_max_event_size(4096);
        let mut out = Vec::new();
        for p in parts {
            if d.push(p, &mut out).is_err() {
                return None;
            }
        }
        d.finish(&mut out).ok()?;
        Some((out, d.last_event_id().map(str::to_owned)))
    };
    // The size limit is chunk-independent too, so even the verdict must agree.
    assert_eq!(
        run(&[body]),
        run(&pieces),
        "chunking changed the frames or the verdict"
    );
    // And the event layer on top never panics.
    let mut events = agwire_codec::sse::SseEventDecoder::new();
    let mut out = Vec::new();
    for p in &pieces {
        if events.push(p, &mut out).is_err() {
            return;
        }
    }
    let _ = events.finish(&mut out);
}

/// The protobuf frame decoder never panics; chunking never changes the events;
/// every event it yields re-encodes and decodes back to itself.
pub fn frame_decoder(data: &[u8]) {
    use agwire_codec::proto::{FrameDecoder, decode_event, encode_event};
    let (pieces, body) = chunks(data);
    let run = |parts: &[&[u8]]| {
        let mut d = FrameDecoder::with_max_frame_size(1 << 16);
        let mut out = Vec::new();
        for p in parts {
            if d.push(p, &mut out).is_err() {
                return (out, false);
            }
        }
        let ok = d.finish().is_ok();
        (out, ok)
    };
    let (whole, whole_ok) = run(&[body]);
    let (split, split_ok) = run(&pieces);
    assert_eq!(whole, split, "chunking changed the events");
    assert_eq!(whole_ok, split_ok, "chunking changed the verdict");
    for event in whole {
        let bytes = encode_event(&event).expect("a decoded event encodes");
        let again = decode_event(&bytes)
            .expect("our own bytes decode")
            .expect("known event");
        assert_eq!(again.value, event, "protobuf round trip changed an event");
    }
    // Raw message bytes, unframed, too.
    let _ = decode_event(body);
}
