//! Writing SSE frames.

use std::io::Write as _;

use agwire_core::Event;
use bytes::Bytes;

/// Writes events as SSE frames into a caller-owned buffer.
///
/// Every method appends to `out` and allocates nothing else: the event's JSON
/// is serialized straight into the buffer, so a server reusing one buffer per
/// connection writes without per-event allocations.
#[derive(Debug, Clone, Copy, Default)]
pub struct SseEncoder;

impl SseEncoder {
    /// An encoder.
    pub fn new() -> Self {
        Self
    }

    /// Appends `data: <compact JSON>\n\n` — byte for byte what
    /// `@ag-ui/encoder` writes, up to the key order of open objects.
    pub fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        out.extend_from_slice(b"data: ");
        write_json(event, out);
        out.extend_from_slice(b"\n\n");
    }

    /// Appends `id: <id>\ndata: <json>\n\n`, for streams a client can resume
    /// with `Last-Event-ID`. The official client ignores the `id` line.
    pub fn encode_with_id(&self, id: u64, event: &Event, out: &mut Vec<u8>) {
        // Writing to a Vec cannot fail.
        let _ = writeln!(out, "id: {id}");
        self.encode(event, out);
    }

    /// Appends a comment frame (`: text\n\n`; `:\n\n` for empty text). CR and
    /// LF in `text` become spaces: SSE has no escape, and a line break would
    /// end the comment and let the rest be read as a field — an injected event.
    pub fn comment(&self, text: &str, out: &mut Vec<u8>) {
        out.push(b':');
        if !text.is_empty() {
            out.push(b' ');
            // CR and LF are ASCII, so replacing bytes keeps the UTF-8 valid.
            out.extend(text.bytes().map(|b| match b {
                b'\n' | b'\r' => b' ',
                b => b,
            }));
        }
        out.extend_from_slice(b"\n\n");
    }

    /// Appends `: keep-alive\n\n`, for idle connections that proxies would
    /// otherwise time out.
    pub fn keep_alive(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b": keep-alive\n\n");
    }

    /// Appends `retry: <millis>\n\n`: how long a resuming client should wait
    /// before reconnecting. Carries no event.
    pub fn retry(&self, millis: u64, out: &mut Vec<u8>) {
        let _ = write!(out, "retry: {millis}\n\n");
    }

    /// One event as a standalone frame.
    pub fn to_bytes(&self, event: &Event) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        self.encode(event, &mut out);
        out
    }

    /// One event as a standalone frame, ready for an HTTP body stream.
    pub fn to_frame(&self, event: &Event) -> Bytes {
        Bytes::from(self.to_bytes(event))
    }
}

fn write_json(event: &Event, out: &mut Vec<u8>) {
    let mark = out.len();
    // Writing to a Vec cannot fail and every map key is a string, so this
    // cannot fail; were it ever to, no half-written JSON may stay behind.
    if serde_json::to_writer(&mut *out, event).is_err() {
        out.truncate(mark);
        out.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str) -> Event {
        Event::from_value(serde_json::json!({"type": "STEP_STARTED", "stepName": name}))
            .unwrap()
            .value
    }

    #[test]
    fn frames_are_exact() {
        let enc = SseEncoder::new();
        let mut out = Vec::new();
        enc.encode(&step("é🌍\u{2028}\"\n"), &mut out);
        // UTF-8 raw (no \u escapes outside what JSON requires), LF only.
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "data: {\"type\":\"STEP_STARTED\",\"stepName\":\"é🌍\u{2028}\\\"\\n\"}\n\n"
        );
        let mut out = Vec::new();
        enc.encode_with_id(42, &step("a"), &mut out);
        enc.encode_with_id(0, &step("b"), &mut out);
        enc.encode_with_id(u64::MAX, &step("c"), &mut out);
        enc.keep_alive(&mut out);
        enc.retry(3000, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "id: 42\ndata: {\"type\":\"STEP_STARTED\",\"stepName\":\"a\"}\n\n\
             id: 0\ndata: {\"type\":\"STEP_STARTED\",\"stepName\":\"b\"}\n\n\
             id: 18446744073709551615\ndata: {\"type\":\"STEP_STARTED\",\"stepName\":\"c\"}\n\n\
             : keep-alive\n\nretry: 3000\n\n"
        );
        assert_eq!(&enc.to_frame(&step("a"))[..], &enc.to_bytes(&step("a"))[..]);
    }

    #[test]
    fn appends_without_disturbing_the_buffer() {
        let enc = SseEncoder::new();
        let mut out = b"prefix".to_vec();
        enc.encode(&step("x"), &mut out);
        assert!(out.starts_with(b"prefix"));
        assert_eq!(&out[6..], &enc.to_bytes(&step("x"))[..]);
    }

    #[test]
    fn comments_cannot_inject_anything() {
        let enc = SseEncoder::new();
        let mut out = Vec::new();
        enc.comment("", &mut out);
        enc.comment("keep\nalive", &mut out);
        enc.comment(
            "x\r\n\r\ndata: {\"type\":\"RUN_ERROR\"}\r\rid: 666\n\nretry: 1",
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            ":\n\n: keep alive\n\n: x    data: {\"type\":\"RUN_ERROR\"}  id: 666  retry: 1\n\n"
        );
        let mut d = super::super::SseDecoder::new();
        let mut frames = Vec::new();
        d.push(&out, &mut frames).unwrap();
        d.finish(&mut frames).unwrap();
        assert!(frames.is_empty());
        assert_eq!((d.last_event_id(), d.retry()), (None, None));
    }
}
