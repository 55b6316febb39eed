//! The protobuf binding (`application/vnd.ag-ui.event+proto`): each event is one
//! `ag_ui.Event` message behind a 4-byte big-endian length.
//!
//! The schema (`proto/ag_ui.proto`) is ours, written from the AG-UI 1.1 field
//! numbers; the generated code is committed, so building needs no `protoc`.
//! Encoding maps events directly; decoding reproduces exactly the JSON the
//! official `@ag-ui/proto` decoder produces and then runs it through the same
//! lenient decoding as an SSE event, so both transports are enforced alike.
//!
//! ```
//! use agwire_codec::proto::{FrameDecoder, encode_frame};
//! use agwire_core::Event;
//!
//! let event = Event::from_json(r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#)?.value;
//! let mut body = Vec::new();
//! encode_frame(&event, &mut body)?;
//! assert_eq!(&body[..4], &[0, 0, 0, (body.len() - 4) as u8]);
//!
//! let mut decoder = FrameDecoder::new();
//! let mut events = Vec::new();
//! for byte in &body {
//!     decoder.push(std::slice::from_ref(byte), &mut events)?; // one byte at a time
//! }
//! decoder.finish()?;
//! assert_eq!(events, vec![event]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod decode;
mod direct;
#[rustfmt::skip]
#[allow(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic
)]
pub mod generated;
pub mod json;
mod writer;

use agwire_core::{Decoded, Event};
use prost::Message as _;

pub use crate::negotiate::PROTO_CONTENT_TYPE;

use crate::Error;

/// The official client's limit on one frame: 10 MiB.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 10 * 1024 * 1024;

/// The serialized `ag_ui.Event` of one event (no length prefix).
///
/// The same bytes as prost would write for the generated `Event` tree of `event`, written straight
/// from the event without copying it into prost's message tree.
pub fn encode_event(event: &Event) -> Result<Vec<u8>, Error> {
    let message = direct::Known::new(event)?;
    let mut out = Vec::new();
    writer::encode(&mut out, &message);
    Ok(out)
}

/// Appends one frame (length prefix and message) to `out`.
pub fn encode_frame(event: &Event, out: &mut Vec<u8>) -> Result<(), Error> {
    let message = direct::Known::new(event)?;
    // A placeholder prefix, patched once the message's length is known.
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let len = writer::encode(out, &message);
    let Ok(prefix) = u32::try_from(len) else {
        out.truncate(start);
        return Err(Error::FrameTooLarge {
            len,
            limit: u32::MAX as usize,
        });
    };
    out[start..start + 4].copy_from_slice(&prefix.to_be_bytes());
    Ok(())
}

/// The JSON the official `@ag-ui/proto` `decode` produces for these bytes, or
/// `None` for an event of a type this build does not know (the 1.x rule: such
/// an event is dropped, not fatal).
pub fn decode_json(bytes: &[u8]) -> Result<Option<serde_json::Value>, Error> {
    match envelope_kind(bytes)? {
        Envelope::Known => {}
        Envelope::FutureOnly => return Ok(None),
    }
    let message = generated::Event::decode(bytes).map_err(|e| Error::Protobuf(e.to_string()))?;
    decode::to_json(message).map(Some)
}

/// Decodes one event (no length prefix). `None`: an event type this build does
/// not know, dropped with a warning.
pub fn decode_event(bytes: &[u8]) -> Result<Option<Decoded<Event>>, Error> {
    match envelope_kind(bytes)? {
        Envelope::Known => {}
        Envelope::FutureOnly => {
            tracing::warn!("dropping a protobuf event of a type this build does not know");
            return Ok(None);
        }
    }
    let message = generated::Event::decode(bytes).map_err(|e| Error::Protobuf(e.to_string()))?;
    // The per-token events of a stream take a direct path: they carry nothing
    // the JSON route could strip or translate, so it gives the same event.
    let message = match decode::streamed(message)? {
        Ok(decoded) => return Ok(Some(decoded)),
        Err(message) => message,
    };
    let json = decode::to_json(message)?;
    Ok(Some(Event::from_value(json)?))
}

enum Envelope {
    Known,
    FutureOnly,
}

/// Walks the envelope's top-level fields: exactly one known arm (possibly
/// repeated, which protobuf merges) is an event; only unknown length-delimited
/// fields is a future event type; anything else is not an event.
fn envelope_kind(bytes: &[u8]) -> Result<Envelope, Error> {
    let invalid = || Error::Protobuf("Invalid event".to_owned());
    let mut at = 0;
    let mut arm = 0u64;
    let mut future = false;
    let varint = |at: &mut usize| -> Result<u64, Error> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *bytes.get(*at).ok_or_else(invalid)?;
            *at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(invalid())
    };
    while at < bytes.len() {
        let tag = varint(&mut at)?;
        let (field, wire) = (tag >> 3, tag & 7);
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return Err(invalid());
        }
        match wire {
            0 => {
                varint(&mut at)?;
            }
            1 => at += 8,
            5 => at += 4,
            2 => {
                let len = usize::try_from(varint(&mut at)?).map_err(|_| invalid())?;
                at = at.checked_add(len).ok_or_else(invalid)?;
                if (1..=31).contains(&field) {
                    if arm != 0 && arm != field {
                        return Err(invalid());
                    }
                    arm = field;
                } else {
                    future = true;
                }
            }
            _ => return Err(invalid()),
        }
        if at > bytes.len() {
            return Err(invalid());
        }
    }
    match (arm, future) {
        (0, true) => Ok(Envelope::FutureOnly),
        (0, false) => Err(invalid()),
        _ => Ok(Envelope::Known),
    }
}

/// Reads frames from arbitrary byte chunks.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    buffer: Vec<u8>,
    max_frame_size: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// A decoder with the default 10 MiB frame limit.
    pub fn new() -> Self {
        Self::with_max_frame_size(DEFAULT_MAX_FRAME_SIZE)
    }

    /// A decoder that refuses frames longer than `max` bytes — before buffering them.
    pub fn with_max_frame_size(max: usize) -> Self {
        Self {
            buffer: Vec::new(),
            max_frame_size: max,
        }
    }

    /// Feeds a chunk; appends every complete frame's event to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), Error> {
        // Frames wholly inside the chunk are decoded in place, without copying.
        let mut rest = chunk;
        if self.buffer.is_empty() {
            rest = self.frames(rest, out)?;
            self.buffer.extend_from_slice(rest);
            return self.check_pending();
        }
        self.buffer.extend_from_slice(rest);
        let buffer = std::mem::take(&mut self.buffer);
        let left = self.frames(&buffer, out)?.len();
        self.buffer = buffer;
        let consumed = self.buffer.len() - left;
        self.buffer.drain(..consumed);
        self.check_pending()
    }

    /// Decodes the complete frames at the start of `bytes`; returns the rest.
    fn frames<'b>(&self, mut bytes: &'b [u8], out: &mut Vec<Event>) -> Result<&'b [u8], Error> {
        while bytes.len() >= 4 {
            let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
            if len > self.max_frame_size {
                return Err(Error::FrameTooLarge {
                    len,
                    limit: self.max_frame_size,
                });
            }
            let Some(frame) = bytes.get(4..4 + len) else {
                break;
            };
            if let Some(decoded) = decode_event(frame)? {
                for warning in &decoded.warnings {
                    warning.trace();
                }
                out.push(decoded.value);
            }
            bytes = &bytes[4 + len..];
        }
        Ok(bytes)
    }

    fn check_pending(&self) -> Result<(), Error> {
        if self.buffer.len() >= 4 {
            let b = &self.buffer;
            let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
            if len > self.max_frame_size {
                return Err(Error::FrameTooLarge {
                    len,
                    limit: self.max_frame_size,
                });
            }
        }
        Ok(())
    }

    /// Ends the body: leftover bytes mean a truncated frame.
    pub fn finish(&mut self) -> Result<(), Error> {
        if self.buffer.is_empty() {
            Ok(())
        } else {
            let left = self.buffer.len();
            self.buffer.clear();
            Err(Error::TruncatedFrame(left))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(json: &str) -> Event {
        Event::from_json(json).unwrap().value
    }

    #[test]
    fn frames_split_and_packed() {
        let events = [
            ev(r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#),
            ev(r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":""}"#),
            ev(r#"{"type":"STATE_SNAPSHOT","snapshot":{"a":[1,2.5,null,"x",true]}}"#),
            ev(
                r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"x"}]}}"#,
            ),
        ];
        let mut body = Vec::new();
        for e in &events {
            encode_frame(e, &mut body).unwrap();
        }
        for split in 0..body.len() {
            let mut d = FrameDecoder::new();
            let mut out = Vec::new();
            d.push(&body[..split], &mut out).unwrap();
            d.push(&body[split..], &mut out).unwrap();
            d.finish().unwrap();
            assert_eq!(out, events, "split at {split}");
        }
    }

    #[test]
    fn limits_and_truncation() {
        let mut d = FrameDecoder::with_max_frame_size(8);
        let mut out = Vec::new();
        assert!(matches!(
            d.push(&[0, 0, 1, 0], &mut out),
            Err(Error::FrameTooLarge { len: 256, limit: 8 })
        ));
        let mut d = FrameDecoder::new();
        d.push(&[0, 0, 0, 5, 1], &mut out).unwrap();
        assert!(matches!(d.finish(), Err(Error::TruncatedFrame(5))));
        // a zero-length frame is an empty envelope: not an event
        let mut d = FrameDecoder::new();
        assert!(d.push(&[0, 0, 0, 0], &mut out).is_err());
    }

    #[test]
    fn unknown_future_arm_is_dropped_not_fatal() {
        // field 40, length-delimited, empty message
        assert!(decode_event(&[0xC2, 0x02, 0x00]).unwrap().is_none());
        // two different arms: not an event
        let mut two = encode_event(&ev(r#"{"type":"STEP_STARTED","stepName":"a"}"#)).unwrap();
        two.extend(encode_event(&ev(r#"{"type":"STEP_FINISHED","stepName":"a"}"#)).unwrap());
        assert!(decode_event(&two).is_err());
        assert!(decode_event(&[0xff]).is_err());
    }

    #[test]
    fn base_type_must_match_the_arm() {
        let bytes = encode_event(&ev(r#"{"type":"STEP_STARTED","stepName":"a"}"#)).unwrap();
        let mut message = generated::Event::decode(bytes.as_slice()).unwrap();
        if let Some(generated::event::Event::StepStarted(s)) = &mut message.event {
            s.base_event.as_mut().unwrap().r#type = generated::EventType::StepFinished as i32;
        }
        let err = decode_event(&message.encode_to_vec())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("envelope carries STEP_STARTED but the base event declares STEP_FINISHED"),
            "{err}"
        );
    }

    #[test]
    fn the_direct_path_equals_the_json_route() {
        for json in [
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"é"}"#,
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"","delta":"","timestamp":-5,"subagentRunId":"s"}"#,
            r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{","metadata":{"k":null},"rawEvent":{"x":[1]}}"#,
            r#"{"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"hm","timestamp":9007199254740991}"#,
        ] {
            let bytes = encode_event(&ev(json)).unwrap();
            let direct = decode_event(&bytes).unwrap().unwrap();
            let routed = Event::from_value(decode_json(&bytes).unwrap().unwrap()).unwrap();
            assert_eq!(direct, routed, "{json}");
        }
        // a legacy null rawEvent, and an unsafe timestamp, through both routes
        let bytes = encode_event(&ev(
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}"#,
        ))
        .unwrap();
        let mut message = generated::Event::decode(bytes.as_slice()).unwrap();
        if let Some(generated::event::Event::TextMessageContent(e)) = &mut message.event {
            e.base_event.as_mut().unwrap().raw_event =
                Some(json::JsonValue(Some(serde_json::Value::Null)));
        }
        let bytes = message.encode_to_vec();
        let direct = decode_event(&bytes).unwrap().unwrap();
        let routed = Event::from_value(decode_json(&bytes).unwrap().unwrap()).unwrap();
        assert_eq!(direct, routed);
        assert_eq!(direct.warnings.len(), 1);
        if let Some(generated::event::Event::TextMessageContent(e)) = &mut message.event {
            e.base_event.as_mut().unwrap().timestamp = Some(i64::MAX);
        }
        let bytes = message.encode_to_vec();
        let direct = decode_event(&bytes).unwrap_err().to_string();
        let routed = Event::from_value(decode_json(&bytes).unwrap().unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(direct, routed);
    }

    #[test]
    fn unknown_events_cannot_be_encoded() {
        let e = ev(r#"{"type":"FUTURE","x":1}"#);
        assert!(matches!(encode_event(&e), Err(Error::Unrepresentable(_))));
    }
}
