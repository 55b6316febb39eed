//! SSE frames to AG-UI events.

use agwire_core::{DecodeError, DecodeMode, Decoded, Event};

use super::{SseDecoder, SseFrame};
use crate::Error;

/// Decodes the `data` of one frame as an AG-UI event.
///
/// Like the official client's transport, the payload must be a JSON object
/// with a non-empty string `type`; a `type` the protocol does not know gives
/// [`Event::Unknown`], for the pipeline to drop with a warning. The frame's
/// `event` field is not consulted (no official producer writes one).
///
/// # Errors
///
/// [`Error::Json`] when `data` is not JSON (an empty `data:` included),
/// [`Error::Decode`] when it is not a valid event.
pub fn decode_frame(frame: &SseFrame, mode: DecodeMode) -> Result<Decoded<Event>, Error> {
    let decoded = Event::from_json_with(&frame.data, mode).map_err(|e| match e {
        agwire_core::Error::Json(e) => Error::Json(e),
        agwire_core::Error::Decode(e) => Error::Decode(e),
        other => Error::Core(other),
    })?;
    if let Event::Unknown(unknown) = &decoded.value
        && unknown.event_type.is_empty()
    {
        // agwire-core keeps such an object as an unknown event; the official
        // transport fails the stream on it, because nothing downstream can
        // route an event without a type.
        return Err(Error::Decode(DecodeError {
            context: "event".to_owned(),
            path: "/type".to_owned(),
            reason: "the frame carries no event type (expected a non-empty string)".to_owned(),
        }));
    }
    Ok(decoded)
}

/// SSE bytes in, AG-UI events out.
///
/// After an error the decoder can be pushed again: decoding goes on with the
/// next frame (an event too large for the frame decoder ends the stream,
/// though). [`last_event_id`](Self::last_event_id) never moves past an event
/// that failed to decode, so a reconnect after a body cut mid-event asks for
/// that event again.
#[derive(Debug, Clone)]
pub struct SseEventDecoder {
    frames: SseDecoder,
    mode: DecodeMode,
    /// Frames read but not yet decoded: those after one that failed.
    pending: Vec<SseFrame>,
    /// The id of the last frame decoded successfully (or of a later block with
    /// no data, once every frame before it decoded).
    resume_id: Option<String>,
}

impl Default for SseEventDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseEventDecoder {
    /// A lenient decoder with the default 10 MiB event limit. Warnings go to
    /// `tracing`.
    pub fn new() -> Self {
        Self::with_frames(SseDecoder::new())
    }

    /// A lenient decoder over a configured frame decoder.
    pub fn with_frames(frames: SseDecoder) -> Self {
        Self {
            frames,
            mode: DecodeMode::Lenient,
            pending: Vec::new(),
            resume_id: None,
        }
    }

    /// A lenient decoder refusing events larger than `max` bytes.
    pub fn with_max_event_size(max: usize) -> Self {
        Self::with_frames(SseDecoder::with_max_event_size(max))
    }

    /// Decodes in `mode` (strict mode accepts exactly the 1.1 schema).
    pub fn mode(mut self, mode: DecodeMode) -> Self {
        self.mode = mode;
        self
    }

    /// The id to resume from: that of the last block delivered whole — never of
    /// an event that failed to decode, nor of one whose block has not ended.
    pub fn last_event_id(&self) -> Option<&str> {
        self.resume_id.as_deref()
    }

    /// The reconnection time (milliseconds) the stream last asked for.
    pub fn retry(&self) -> Option<u64> {
        self.frames.retry()
    }

    /// Feeds a chunk; appends the events it completes.
    ///
    /// # Errors
    ///
    /// The first frame that fails ([`decode_frame`]), after appending the
    /// events before it; or [`Error::SseEventTooLarge`].
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), Error> {
        let framing = self.frames.push(chunk, &mut self.pending);
        // Frames completed before an oversized event still come first.
        self.drain(out)?;
        framing
    }

    /// Ends the body; the final block is decoded even without its blank line.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push): a body cut inside an event usually fails here
    /// with [`Error::Json`].
    pub fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), Error> {
        let framing = self.frames.finish(&mut self.pending);
        self.drain(out)?;
        framing
    }

    fn drain(&mut self, out: &mut Vec<Event>) -> Result<(), Error> {
        let mut done = 0;
        let mut result = Ok(());
        for frame in &mut self.pending {
            done += 1;
            match decode_frame(frame, self.mode) {
                Ok(decoded) => {
                    for warning in &decoded.warnings {
                        warning.trace();
                    }
                    out.push(decoded.value);
                    if frame.id != self.resume_id {
                        self.resume_id = frame.id.take();
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.pending.drain(..done);
        if result.is_ok() && self.resume_id.as_deref() != self.frames.last_event_id() {
            // Blocks without data after the last event may have moved the id.
            self.resume_id = self.frames.last_event_id().map(str::to_owned);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(body: &[u8]) -> (Vec<Event>, Result<(), Error>) {
        let mut d = SseEventDecoder::new();
        let mut out = Vec::new();
        let r = d.push(body, &mut out).and_then(|()| d.finish(&mut out));
        (out, r)
    }

    fn frame(data: &str) -> SseFrame {
        SseFrame {
            data: data.to_owned(),
            ..SseFrame::default()
        }
    }

    #[test]
    fn events_decode_and_errors_say_why() {
        let (events, r) = run(b"data: {\"type\":\"RAW\",\"event\":null}\n\n");
        assert_eq!(events.len(), 1);
        r.unwrap();
        assert!(matches!(run(b"data: {nope\n\n").1, Err(Error::Json(_))));
        let err = run(b"data: {\"type\":\"RAW\"}\n\n").1.unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid RAW at '/event': expected any, received undefined"
        );
    }

    #[test]
    fn payloads_the_official_transport_rejects() {
        // JSON.parse("") throws in the official parser; so do we.
        for data in ["", " "] {
            assert!(matches!(
                decode_frame(&frame(data), DecodeMode::Lenient),
                Err(Error::Json(_))
            ));
        }
        // Not an object, or no usable type: "Invalid event" in the official client.
        for data in [
            "null",
            "1",
            "\"RUN_STARTED\"",
            "[]",
            "{}",
            "{\"type\":\"\"}",
            "{\"type\":5}",
        ] {
            let r = decode_frame(&frame(data), DecodeMode::Lenient);
            assert!(matches!(r, Err(Error::Decode(_))), "{data}: {r:?}");
        }
        // An unknown type passes the transport; the pipeline drops it later.
        let d = decode_frame(
            &frame("{\"type\":\"FUTURE_EVENT\",\"x\":1}"),
            DecodeMode::Lenient,
        )
        .unwrap();
        assert!(matches!(d.value, Event::Unknown(_)));
        // Strict mode is the schema: an unknown member fails there only.
        let f = frame("{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\",\"extra\":1}");
        assert!(decode_frame(&f, DecodeMode::Lenient).is_ok());
        assert!(matches!(
            decode_frame(&f, DecodeMode::Strict),
            Err(Error::Decode(_))
        ));
        let (events, r) = {
            let mut d = SseEventDecoder::new().mode(DecodeMode::Strict);
            let mut out = Vec::new();
            let r = d.push(
                b"data: {\"type\":\"STEP_STARTED\",\"stepName\":\"s\",\"x\":1}\n\n",
                &mut out,
            );
            (out, r)
        };
        assert!(events.is_empty() && r.is_err());
    }

    #[test]
    fn decoding_goes_on_after_a_bad_frame_in_order() {
        let mut d = SseEventDecoder::new();
        let mut out = Vec::new();
        let body = b"id: 1\ndata: {\"type\":\"STEP_STARTED\",\"stepName\":\"a\"}\n\n\
                     id: 2\ndata: nope\n\n\
                     id: 3\ndata: {\"type\":\"STEP_STARTED\",\"stepName\":\"c\"}\n\n";
        assert!(matches!(d.push(body, &mut out), Err(Error::Json(_))));
        assert_eq!(out.len(), 1);
        assert_eq!(d.last_event_id(), Some("1"));
        // The frame after the bad one was read with it and is not lost.
        d.push(
            b"id: 4\ndata: {\"type\":\"STEP_STARTED\",\"stepName\":\"d\"}\n\n",
            &mut out,
        )
        .unwrap();
        let names: Vec<String> = out.iter().map(|e| e.to_json()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names[1].contains("\"c\"") && names[2].contains("\"d\""));
        assert_eq!(d.last_event_id(), Some("4"));
    }

    #[test]
    fn a_body_cut_mid_event_resumes_from_the_last_whole_event() {
        let mut d = SseEventDecoder::new();
        let mut out = Vec::new();
        d.push(b"id: 7\ndata: {\"type\":\"STEP_STARTED\",\"stepName\":\"a\"}\n\nid: 8\ndata: {\"type\":\"STEP_FIN", &mut out)
            .unwrap();
        assert_eq!(d.last_event_id(), Some("7"));
        assert!(matches!(d.finish(&mut out), Err(Error::Json(_))));
        // The cut event was dispatched at the end of the body and failed: a
        // reconnect must ask for it again.
        assert_eq!(d.last_event_id(), Some("7"));
        // A reconnect: the server replays from 8.
        d.push(
            b"id: 8\ndata: {\"type\":\"STEP_FINISHED\",\"stepName\":\"a\"}\n\nid: 9\n\n",
            &mut out,
        )
        .unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(d.last_event_id(), Some("9"));
    }

    #[test]
    fn frames_before_an_oversized_event_are_delivered_first() {
        let mut d = SseEventDecoder::with_max_event_size(64);
        let mut out = Vec::new();
        let mut body = b"data: {\"type\":\"STEP_STARTED\",\"stepName\":\"a\"}\n\ndata: ".to_vec();
        body.extend_from_slice(&[b'x'; 100]);
        assert!(matches!(
            d.push(&body, &mut out),
            Err(Error::SseEventTooLarge { limit: 64 })
        ));
        assert_eq!(out.len(), 1);
        assert!(d.push(b"\n\n", &mut out).is_err());
    }
}
