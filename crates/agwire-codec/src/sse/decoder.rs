//! Reading SSE frames from bytes split anywhere.
//!
//! The field rules are the WHATWG event-stream ones (`id`, `event`, `retry`,
//! `data`, comments, CR / LF / CRLF). The official client's parser is narrower
//! — it only splits on `\n\n` — and reads every LF-only stream exactly as this
//! decoder does; the two deliberate differences are listed in the
//! [module documentation](super).

use crate::Error;

/// The official client's limit on an unterminated event: 10 MiB.
pub const DEFAULT_MAX_EVENT_SIZE: usize = 10 * 1024 * 1024;

/// A UTF-8 byte order mark, skipped at the start of a body as `TextDecoder` does.
const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

/// A data buffer that grew past this is released after its event instead of
/// being kept for the next one: one huge event must not pin its memory for the
/// life of the stream.
const KEEP_CAPACITY: usize = 64 * 1024;

/// One dispatched SSE event: a block that had at least one `data` line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseFrame {
    /// The `data` lines joined with `\n`.
    pub data: String,
    /// The `event` field of this block; `None` when absent or empty (both mean
    /// `message` to an `EventSource`).
    pub event: Option<String>,
    /// The last event id in effect when this frame was dispatched (this block's
    /// `id`, or the latest earlier one); `None` when none was set or it was
    /// reset by an empty `id`.
    pub id: Option<String>,
    /// A valid `retry` (milliseconds) given in this block.
    pub retry: Option<u64>,
}

/// An incremental SSE parser over arbitrary byte chunks.
///
/// Feed it with [`push`](Self::push) as bytes arrive and call
/// [`finish`](Self::finish) at the end of the body. How the body is split into
/// chunks never changes the frames, the ids or whether (and where) an error
/// occurs.
#[derive(Debug, Clone)]
pub struct SseDecoder {
    max_event_size: usize,
    /// The current line, while it is split across chunks (never its terminator).
    line: Vec<u8>,
    /// The previous chunk ended in CR: an LF opening the next one ends no line.
    after_cr: bool,
    /// At the start of a body: how many bytes of a BOM have been seen.
    bom_seen: Option<usize>,
    /// The `data` lines of the current block, joined with `\n`.
    data: Vec<u8>,
    /// Whether the current block had a `data` line (`data:` alone counts).
    has_data: bool,
    /// The current block's `event`.
    event: Option<String>,
    /// The current block's `retry`.
    block_retry: Option<u64>,
    /// The reconnection time in effect.
    retry: Option<u64>,
    /// The WHATWG "last event ID buffer": set by `id`, committed at dispatch.
    id_buffer: Option<String>,
    id_changed: bool,
    /// The committed "last event ID string".
    last_id: Option<String>,
    /// An event overflowed: the stream is unusable.
    failed: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default 10 MiB event limit.
    pub fn new() -> Self {
        Self::with_max_event_size(DEFAULT_MAX_EVENT_SIZE)
    }

    /// A decoder that refuses an event once the data it has buffered plus the
    /// line being read exceed `max` bytes. Memory stays bounded by about twice
    /// `max`, whatever the peer sends.
    pub fn with_max_event_size(max: usize) -> Self {
        Self {
            max_event_size: max,
            line: Vec::new(),
            after_cr: false,
            bom_seen: Some(0),
            data: Vec::new(),
            has_data: false,
            event: None,
            block_retry: None,
            retry: None,
            id_buffer: None,
            id_changed: false,
            last_id: None,
            failed: false,
        }
    }

    /// The configured event limit in bytes.
    pub fn max_event_size(&self) -> usize {
        self.max_event_size
    }

    /// The last event id of a dispatched block: what a reconnect sends as
    /// `Last-Event-ID`. An `id` in a block that has not ended yet does not count
    /// (its event has not been delivered); a block with an `id` but no `data`
    /// does. `None` when no id was set or an empty `id` reset it.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection time (milliseconds) the stream asked for with its latest
    /// valid `retry` field, whether or not that block carried data.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Feeds a chunk; appends every frame it completes to `out`.
    ///
    /// # Errors
    ///
    /// [`Error::SseEventTooLarge`] when an event outgrows the limit. Frames
    /// completed before the oversized event are still appended to `out`. The
    /// stream cannot be resumed past it: every later call fails the same way.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<SseFrame>) -> Result<(), Error> {
        if self.failed {
            return Err(self.too_large());
        }
        if let Some(mut seen) = self.bom_seen {
            // A BOM may itself arrive split across chunks.
            while seen < BOM.len() {
                match chunk.split_first() {
                    None => {
                        self.bom_seen = Some(seen);
                        return Ok(());
                    }
                    Some((&b, rest)) if b == BOM[seen] => {
                        seen += 1;
                        chunk = rest;
                    }
                    Some(_) => break,
                }
            }
            self.bom_seen = None;
            if seen < BOM.len() {
                // Not a BOM after all: those bytes are text.
                let r = self.feed(&BOM[..seen], out);
                self.guard(r)?;
            }
        }
        let r = self.feed(chunk, out);
        self.guard(r)
    }

    /// Ends the body. A final block without its blank line is still dispatched,
    /// as the official client does.
    ///
    /// The decoder is then ready for the next body of the same stream (a
    /// reconnect): the last event id and the retry time carry over, everything
    /// else starts afresh.
    ///
    /// # Errors
    ///
    /// [`Error::SseEventTooLarge`] if the stream already failed.
    pub fn finish(&mut self, out: &mut Vec<SseFrame>) -> Result<(), Error> {
        if self.failed {
            return Err(self.too_large());
        }
        if let Some(seen) = self.bom_seen.take()
            && seen > 0
        {
            // The body ended inside what could have been a BOM.
            let r = self.feed(&BOM[..seen], out);
            self.guard(r)?;
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let r = self.line_done(&line, out);
            self.guard(r)?;
        }
        self.dispatch(out);
        self.after_cr = false;
        self.bom_seen = Some(0);
        Ok(())
    }

    fn too_large(&self) -> Error {
        Error::SseEventTooLarge {
            limit: self.max_event_size,
        }
    }

    /// Poisons the decoder on an error and releases what it buffered.
    fn guard(&mut self, r: Result<(), Error>) -> Result<(), Error> {
        if r.is_err() {
            self.failed = true;
            self.line = Vec::new();
            self.data = Vec::new();
        }
        r
    }

    /// Fails when the current block's data plus a line of `line_len` bytes
    /// exceed the limit. Checking every line, whole or partial, against the
    /// data before it makes the verdict independent of chunking.
    fn check(&self, line_len: usize) -> Result<(), Error> {
        if self.data.len().saturating_add(line_len) > self.max_event_size {
            return Err(self.too_large());
        }
        Ok(())
    }

    fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseFrame>) -> Result<(), Error> {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            let text = &chunk[..end];
            let cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if self.line.is_empty() {
                // The whole line is in this chunk: no copy.
                self.line_done(text, out)?;
            } else {
                self.check(self.line.len() + text.len())?;
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(text);
                let r = self.line_done(&line, out);
                // Keep the allocation for the next split line.
                line.clear();
                self.line = line;
                r?;
            }
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        if !chunk.is_empty() {
            // Checked before it is buffered, so the buffer never outgrows the limit.
            self.check(self.line.len() + chunk.len())?;
            self.line.extend_from_slice(chunk);
        }
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseFrame>) -> Result<(), Error> {
        self.check(line.len())?;
        let (field, value) = match line.iter().position(|&b| b == b':') {
            None if line.is_empty() => {
                self.dispatch(out);
                return Ok(());
            }
            // A comment.
            Some(0) => return Ok(()),
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            // A field name alone has an empty value (`data` is an empty data line).
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.event = non_empty(value),
            // An id containing NUL is ignored (it could not be sent back in a header).
            b"id" if !value.contains(&0) => {
                self.id_buffer = non_empty(value);
                self.id_changed = true;
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // All ASCII digits, so valid UTF-8; a value beyond u64 is ignored.
                if let Some(ms) = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                    self.retry = Some(ms);
                    self.block_retry = Some(ms);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseFrame>) {
        if self.id_changed {
            self.id_changed = false;
            self.last_id.clone_from(&self.id_buffer);
        }
        let event = self.event.take();
        let retry = self.block_retry.take();
        if !self.has_data {
            // A block of comments, `id`, `event` or `retry` only: no event.
            return;
        }
        self.has_data = false;
        // Copied out rather than moved so the buffer's capacity serves the next
        // event: one exact allocation per event instead of a series of regrowths.
        let data = String::from_utf8_lossy(&self.data).into_owned();
        if self.data.capacity() > KEEP_CAPACITY {
            self.data = Vec::new();
        } else {
            self.data.clear();
        }
        out.push(SseFrame {
            data,
            event,
            id: self.last_id.clone(),
            retry,
        });
    }
}

/// A field value as text; invalid UTF-8 reads as U+FFFD, as
/// `TextDecoder(fatal: false)` reads it.
fn non_empty(value: &[u8]) -> Option<String> {
    (!value.is_empty()).then(|| String::from_utf8_lossy(value).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(chunks: &[&[u8]]) -> Vec<SseFrame> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.push(c, &mut out).unwrap();
        }
        d.finish(&mut out).unwrap();
        out
    }

    fn data(chunks: &[&[u8]]) -> Vec<String> {
        frames(chunks).into_iter().map(|f| f.data).collect()
    }

    #[test]
    fn line_endings_all_work_and_split_anywhere() {
        let body = "data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: é🌍\n\n";
        let whole = data(&[body.as_bytes()]);
        assert_eq!(whole, ["a", "b", "c", "é🌍"]);
        let bytes = body.as_bytes();
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                assert_eq!(
                    data(&[&bytes[..i], &bytes[i..j], &bytes[j..]]),
                    whole,
                    "split at {i},{j}"
                );
            }
        }
    }

    #[test]
    fn cr_at_chunk_end_then_lf_is_one_line_end() {
        // Were the LF a second line end, it would dispatch `a` alone.
        assert_eq!(data(&[b"data: a\r", b"\ndata: b\n\n"]), ["a\nb"]);
        // ... but a CR then a CR are two.
        assert_eq!(data(&[b"data: a\r", b"\rdata: b\n\n"]), ["a", "b"]);
    }

    #[test]
    fn multi_line_data_comments_and_fields() {
        let f = frames(&[b": hello\nevent: x\nid: 7\nretry: 3000\ndata:one\ndata: two\ndata\n\n"]);
        assert_eq!(
            f,
            [SseFrame {
                data: "one\ntwo\n".into(),
                event: Some("x".into()),
                id: Some("7".into()),
                retry: Some(3000),
            }]
        );
        // Only one space is stripped; `data:` alone is an empty line of data.
        assert_eq!(data(&[b"data:  x\ndata:\n\n"]), [" x\n"]);
        // The event type does not outlive its block; the id does.
        let f = frames(&[b"event: a\nid: 1\ndata: x\n\ndata: y\n\n"]);
        assert_eq!(
            (f[1].event.as_deref(), f[1].id.as_deref()),
            (None, Some("1"))
        );
    }

    #[test]
    fn ids_commit_when_their_block_ends() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        // id-only and comment-only blocks dispatch nothing, but the id sticks.
        d.push(b"id: 9\n\n: ping\n\ndata: x\n\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id.as_deref(), Some("9"));
        assert_eq!(d.last_event_id(), Some("9"));
        // An id whose block has not ended is not yet the id to resume from.
        d.push(b"id: 10\ndata: {\"half", &mut out).unwrap();
        assert_eq!(d.last_event_id(), Some("9"));
        d.push(b"\"}\n\n", &mut out).unwrap();
        assert_eq!(d.last_event_id(), Some("10"));
        // An empty id resets it; an id with NUL is ignored.
        d.push(b"id\n\n", &mut out).unwrap();
        assert_eq!(d.last_event_id(), None);
        d.push(b"id: 11\n\nid: a\0b\ndata: y\n\n", &mut out)
            .unwrap();
        assert_eq!(d.last_event_id(), Some("11"));
        assert_eq!(out.last().unwrap().id.as_deref(), Some("11"));
    }

    #[test]
    fn retry_is_recorded_even_without_data() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        d.push(b"retry: 2500\n\n", &mut out).unwrap();
        assert!(out.is_empty());
        assert_eq!(d.retry(), Some(2500));
        // Not digits only (WHATWG): ignored, the earlier value stays.
        for bad in [
            &b"retry: 1x\n"[..],
            b"retry: -1\n",
            b"retry: 1.5\n",
            b"retry:\n",
            b"retry: 99999999999999999999999\n",
        ] {
            d.push(bad, &mut out).unwrap();
        }
        d.push(b"data: y\n\n", &mut out).unwrap();
        assert_eq!((out[0].retry, d.retry()), (None, Some(2500)));
        d.push(b"retry:7\ndata: z\n\n", &mut out).unwrap();
        assert_eq!((out[1].retry, d.retry()), (Some(7), Some(7)));
    }

    #[test]
    fn unknown_fields_and_empty_event_are_ignored() {
        let f = frames(&[b"foo: bar\nevent:\nDATA: no\n data: no\ndata: yes\n\n"]);
        assert_eq!(
            f,
            [SseFrame {
                data: "yes".into(),
                ..SseFrame::default()
            }]
        );
    }

    #[test]
    fn bom_is_skipped_even_when_split() {
        let body = b"\xEF\xBB\xBFdata: x\n\n";
        for i in 0..body.len() {
            for j in i..body.len() {
                assert_eq!(
                    data(&[&body[..i], &body[i..j], &body[j..]]),
                    ["x"],
                    "split at {i},{j}"
                );
            }
        }
        // Only one, only at the start.
        assert_eq!(
            data(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n"]),
            Vec::<String>::new()
        );
        assert_eq!(data(&[b"data: \xEF\xBB\xBFx\n\n"]), ["\u{feff}x"]);
        // A BOM prefix that is not a BOM is text (here, a broken field name).
        assert_eq!(data(&[b"\xEF\xBB"]), Vec::<String>::new());
        assert_eq!(data(&[b"\xEF", b"data: x\n\n"]), Vec::<String>::new());
    }

    #[test]
    fn final_block_without_blank_line_is_flushed() {
        assert_eq!(data(&[b"data: a\n\ndata: b"]), ["a", "b"]);
        assert_eq!(data(&[b"data: a\n\ndata: b\n"]), ["a", "b"]);
        assert_eq!(data(&[b"data: a\n\ndata: b\r"]), ["a", "b"]);
        assert_eq!(data(&[b"data: a\n\n: trailing comment"]), ["a"]);
    }

    #[test]
    fn finish_readies_the_decoder_for_a_reconnect() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        d.push(b"retry: 5\nid: 3\ndata: a\n\ndata: cut", &mut out)
            .unwrap();
        d.finish(&mut out).unwrap();
        // A new body may start with a BOM again; id and retry carry over.
        d.push(b"\xEF\xBB\xBFdata: b\n\n", &mut out).unwrap();
        let got: Vec<_> = out
            .iter()
            .map(|f| (f.data.as_str(), f.id.as_deref()))
            .collect();
        assert_eq!(
            got,
            [("a", Some("3")), ("cut", Some("3")), ("b", Some("3"))]
        );
        assert_eq!(d.retry(), Some(5));
    }

    #[test]
    fn invalid_utf8_reads_as_replacement() {
        assert_eq!(data(&[b"data: a\xffb\n\n"]), ["a\u{fffd}b"]);
        // A truncated sequence is one U+FFFD (maximal subpart), also across
        // a data-line join and at the end of the body.
        assert_eq!(data(&[b"data: \xe2\x82\ndata: x\n\n"]), ["\u{fffd}\nx"]);
        assert_eq!(data(&[b"data: \xf0\x9f\x8c"]), ["\u{fffd}"]);
        let f = frames(&[b"id: \xff\nevent: \xc3\ndata: x\n\n"]);
        assert_eq!(f[0].id.as_deref(), Some("\u{fffd}"));
        assert_eq!(f[0].event.as_deref(), Some("\u{fffd}"));
    }

    #[test]
    fn oversized_events_are_refused_wherever_the_chunks_fall() {
        let mut d = SseDecoder::with_max_event_size(16);
        let mut out = Vec::new();
        assert!(d.push(b"data: 0123456789", &mut out).is_ok());
        let err = d.push(b"abcdefghijk", &mut out).unwrap_err();
        assert!(matches!(err, Error::SseEventTooLarge { limit: 16 }));
        // Poisoned: every later call fails too.
        assert!(d.push(b"\n\n", &mut out).is_err());
        assert!(d.finish(&mut out).is_err());
        assert!(out.is_empty());

        // Data accumulated over several lines counts; earlier frames survive.
        let body = b"data: ok\n\ndata: 0123456789\ndata: 0123456789\n\ndata: never\n\n";
        for i in 0..=body.len() {
            let mut d = SseDecoder::with_max_event_size(20);
            let mut out = Vec::new();
            let r = d
                .push(&body[..i], &mut out)
                .and_then(|()| d.push(&body[i..], &mut out));
            assert!(r.is_err(), "split at {i}");
            assert_eq!(out.len(), 1, "split at {i}");
            assert_eq!(out[0].data, "ok");
        }

        // Exactly at the limit is fine: 16 bytes of line, then 10 of data
        // plus a 6-byte line.
        let mut d = SseDecoder::with_max_event_size(16);
        let mut out = Vec::new();
        d.push(b"data: 0123456789\n: 3456\n\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        // A long comment line is refused too: it would be buffered when split.
        let mut d = SseDecoder::with_max_event_size(16);
        assert!(d.push(b": 0123456789abcdef\n", &mut out).is_err());
    }

    #[test]
    fn large_events_do_not_pin_their_buffer() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        let big = format!("data: {}\n\n", "x".repeat(200_000));
        d.push(big.as_bytes(), &mut out).unwrap();
        d.push(b"data: small\n\n", &mut out).unwrap();
        assert_eq!(out[0].data.len(), 200_000);
        assert!(d.data.capacity() <= KEEP_CAPACITY);
    }
}
