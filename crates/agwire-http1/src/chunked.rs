//! The chunked transfer coding of a request body (RFC 9112 §7.1), decoded
//! from bytes already read, as strictly as hyper decodes it:
//!
//! - a chunk size is 1 to 16 hex digits (no digit is an error — never
//!   "size 0"; hyper also takes leading zeros past 16 digits, here that
//!   line is refused so that it stays short);
//! - after it only spaces or tabs, then `;` extensions, then CRLF; a bare LF
//!   anywhere on the line is an error (a front end that ends lines at LF
//!   would otherwise see a different body, and a request hidden in it);
//! - extensions are ignored but counted: 16 KiB per body at most;
//! - chunk data ends with CRLF exactly;
//! - the trailer section is at most 16 KiB and [`MAX_TRAILERS`] fields, each
//!   a valid field line (a request line there is an error); trailers are
//!   read and dropped.

use bytes::{Buf, Bytes, BytesMut};

/// Bytes of chunk extensions one body may carry (hyper's limit).
pub const MAX_EXTENSION_BYTES: u64 = 16 * 1024;
/// Bytes of the trailer section (hyper's limit).
pub const MAX_TRAILER_BYTES: usize = 16 * 1024;
/// Fields in the trailer section.
pub const MAX_TRAILERS: usize = 100;

use crate::BodyError;

/// A malformed chunked body.
const fn malformed(why: &'static str) -> BodyError {
    BodyError::Malformed(why)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The first digit of a chunk size.
    Start,
    /// More digits of a size (the digits so far).
    Size(u64, u8),
    /// Spaces or tabs after the size.
    SizeLws(u64),
    /// Inside extensions.
    Extension(u64),
    /// The LF ending a size line.
    SizeLf(u64),
    /// Chunk data, this much left.
    Data(u64),
    DataCr,
    DataLf,
    /// The start of a trailer line, or the final CRLF.
    TrailerStart,
    /// Inside a trailer line.
    Trailer,
    TrailerLf,
    /// The LF of the final CRLF.
    EndLf,
    Done,
}

/// What [`Chunked::decode`] came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Body bytes.
    Data(Bytes),
    /// Every byte in the buffer is used: read more.
    NeedMore,
    /// The body ended (its bytes, trailers included, are consumed).
    Done,
}

/// A chunked body being decoded.
#[derive(Debug)]
pub struct Chunked {
    state: State,
    extension_bytes: u64,
    /// The trailer section so far, to be validated when it ends.
    trailers: Option<BytesMut>,
}

impl Default for Chunked {
    fn default() -> Self {
        Self::new()
    }
}

impl Chunked {
    /// A decoder at the start of a body.
    #[must_use]
    pub fn new() -> Self {
        Self {
            state: State::Start,
            extension_bytes: 0,
            trailers: None,
        }
    }

    /// Whether the body has ended.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes bytes from the front of `buf`: the next piece of data, or
    /// [`Step::NeedMore`] once all of `buf` is used, or [`Step::Done`].
    /// Bytes after the body's end are left in `buf`.
    ///
    /// # Errors
    ///
    /// [`BodyError::Malformed`] when the framing is malformed; nothing more
    /// can be read from the connection then.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, BodyError> {
        loop {
            if let State::Data(left) = self.state {
                if buf.is_empty() {
                    return Ok(Step::NeedMore);
                }
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                let left = left - n as u64;
                self.state = if left == 0 {
                    State::DataCr
                } else {
                    State::Data(left)
                };
                return Ok(Step::Data(buf.split_to(n).freeze()));
            }
            if self.state == State::Done {
                return Ok(Step::Done);
            }
            let Some(&byte) = buf.first() else {
                return Ok(Step::NeedMore);
            };
            buf.advance(1);
            self.state = self.step(byte)?;
            if self.state == State::Done {
                self.finish_trailers()?;
                return Ok(Step::Done);
            }
        }
    }

    fn step(&mut self, byte: u8) -> Result<State, BodyError> {
        Ok(match self.state {
            State::Start => match hex(byte) {
                Some(digit) => State::Size(digit, 1),
                None => return Err(malformed("a chunk size has no digit")),
            },
            State::Size(size, digits) => match (hex(byte), byte) {
                (Some(digit), _) => {
                    if digits >= 16 {
                        return Err(malformed("a chunk size overflows"));
                    }
                    State::Size(size << 4 | digit, digits + 1)
                }
                (None, b' ' | b'\t') => State::SizeLws(size),
                (None, b';') => State::Extension(size),
                (None, b'\r') => State::SizeLf(size),
                _ => return Err(malformed("invalid byte in a chunk size")),
            },
            State::SizeLws(size) => match byte {
                b' ' | b'\t' => State::SizeLws(size),
                b';' => State::Extension(size),
                b'\r' => State::SizeLf(size),
                _ => return Err(malformed("invalid byte after a chunk size")),
            },
            State::Extension(size) => match byte {
                b'\r' => State::SizeLf(size),
                b'\n' => return Err(malformed("a chunk extension contains a bare LF")),
                _ => {
                    self.extension_bytes += 1;
                    if self.extension_bytes > MAX_EXTENSION_BYTES {
                        return Err(malformed("chunk extensions over 16 KiB"));
                    }
                    State::Extension(size)
                }
            },
            State::SizeLf(size) => match byte {
                b'\n' if size == 0 => State::TrailerStart,
                b'\n' => State::Data(size),
                _ => return Err(malformed("a chunk size line does not end with CRLF")),
            },
            // `decode` takes these without a byte.
            State::Data(_) | State::Done => self.state,
            State::DataCr => match byte {
                b'\r' => State::DataLf,
                _ => return Err(malformed("chunk data longer than its size")),
            },
            State::DataLf => match byte {
                b'\n' => State::Start,
                _ => return Err(malformed("chunk data does not end with CRLF")),
            },
            State::TrailerStart => match byte {
                b'\r' => State::EndLf,
                _ => {
                    self.trailer_byte(byte)?;
                    State::Trailer
                }
            },
            State::Trailer => {
                self.trailer_byte(byte)?;
                match byte {
                    b'\r' => State::TrailerLf,
                    b'\n' => return Err(malformed("a trailer line contains a bare LF")),
                    _ => State::Trailer,
                }
            }
            State::TrailerLf => match byte {
                b'\n' => {
                    self.trailer_byte(byte)?;
                    State::TrailerStart
                }
                _ => return Err(malformed("a trailer line does not end with CRLF")),
            },
            State::EndLf => match byte {
                b'\n' => State::Done,
                _ => return Err(malformed("a chunked body does not end with CRLF")),
            },
        })
    }

    fn trailer_byte(&mut self, byte: u8) -> Result<(), BodyError> {
        let trailers = self.trailers.get_or_insert_with(BytesMut::new);
        if trailers.len() >= MAX_TRAILER_BYTES {
            return Err(malformed("trailers over 16 KiB"));
        }
        trailers.extend_from_slice(&[byte]);
        Ok(())
    }

    /// Every trailer line must be a field line (`name: value`).
    fn finish_trailers(&mut self) -> Result<(), BodyError> {
        let Some(mut trailers) = self.trailers.take() else {
            return Ok(());
        };
        trailers.extend_from_slice(b"\r\n");
        let mut fields = [httparse::EMPTY_HEADER; MAX_TRAILERS];
        match httparse::parse_headers(&trailers, &mut fields) {
            Ok(httparse::Status::Complete((used, _))) if used == trailers.len() => Ok(()),
            Err(httparse::Error::TooManyHeaders) => Err(malformed("too many trailer fields")),
            _ => Err(malformed("a trailer line is not a field")),
        }
    }
}

fn hex(byte: u8) -> Option<u64> {
    char::from(byte).to_digit(16).map(u64::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `wire` fed in pieces of `step` bytes: the body and what is
    /// left after it, or the error (an unended body is one too).
    fn decode(wire: &[u8], step: usize) -> Result<(Vec<u8>, usize), BodyError> {
        crate::fuzzing::decode_chunked(wire, step)?.ok_or(malformed("incomplete"))
    }

    #[test]
    fn chunks_are_decoded_however_they_are_split() {
        let wire =
            b"5\r\nhello\r\n6;a=b;c\r\n world\r\nA \t\r\n0123456789\r\n0\r\nx-t: 1\r\n\r\nNEXT";
        for step in [1, 2, 3, 7, wire.len()] {
            let (body, left) = decode(wire, step).expect("valid");
            assert_eq!(body, b"hello world0123456789", "pieces of {step}");
            assert_eq!(left, 4, "pieces of {step}");
        }
    }

    #[test]
    fn what_hyper_refuses_is_refused() {
        for wire in [
            &b"5;a\nb\r\nhello\r\n0\r\n\r\n"[..], // bare LF in an extension
            b"\r\nhello\r\n0\r\n\r\n",            // no digits
            b";x\r\n0\r\n\r\n",                   // no digits, an extension
            b"5\nhello\r\n0\r\n\r\n",             // size line ends with LF
            b"5\r\nhello!\r\n0\r\n\r\n",          // data longer than its size
            b"5\r\nhello\n0\r\n\r\n",             // data ends with LF
            b"11111111111111111\r\n",             // 17 digits
            b"5 5\r\nhello\r\n0\r\n\r\n",         // a digit after whitespace
            b"0\r\nGET / HTTP/1.1\r\n\r\n",       // a request line in the trailers
            b"0\r\nx: 1\nGET / HTTP/1.1\r\n\r\n", // a bare LF in the trailers
            b"0\r\n\n",                           // the last line ends with LF
        ] {
            assert!(
                decode(wire, 1).is_err() && decode(wire, wire.len()).is_err(),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn extensions_and_trailers_are_bounded() {
        let ext = "a".repeat(usize::try_from(MAX_EXTENSION_BYTES).unwrap_or(0) / 2 + 1);
        let wire = format!("1;{ext}\r\nx\r\n1;{ext}\r\ny\r\n0\r\n\r\n");
        assert_eq!(
            decode(wire.as_bytes(), 4096),
            Err(malformed("chunk extensions over 16 KiB"))
        );
        let trailers = "x-a: b\r\n".repeat(MAX_TRAILER_BYTES / 8 + 1);
        let wire = format!("0\r\n{trailers}\r\n");
        assert_eq!(
            decode(wire.as_bytes(), 4096),
            Err(malformed("trailers over 16 KiB"))
        );
        let trailers = "x-a: b\r\n".repeat(MAX_TRAILERS + 1);
        let wire = format!("0\r\n{trailers}\r\n");
        assert_eq!(
            decode(wire.as_bytes(), 4096),
            Err(malformed("too many trailer fields"))
        );
    }
}
