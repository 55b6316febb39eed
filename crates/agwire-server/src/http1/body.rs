//! The bytes of a request body on the wire: a declared length, or chunks.

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;

use super::inbound::BodyError;

/// Largest piece read from the socket at once for a body.
const PIECE: usize = 64 * 1024;
/// Longest chunk-size line or trailer line accepted.
const MAX_LINE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chunked {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk with this many bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// Expecting trailer lines, up to an empty one.
    Trailers,
}

/// Where a body being read stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decoder {
    /// This many bytes left of a declared length.
    Length(u64),
    Chunked(Chunked),
    /// Read to its end.
    Done,
}

impl Decoder {
    pub(crate) fn length(n: u64) -> Self {
        if n == 0 { Self::Done } else { Self::Length(n) }
    }

    pub(crate) fn chunked() -> Self {
        Self::Chunked(Chunked::Size)
    }

    pub(crate) fn is_done(self) -> bool {
        self == Self::Done
    }

    /// The next piece of the body (`None` at its end), from `buf` first and
    /// then the socket. Cancel-safe: the state moves only with bytes that
    /// are already in `buf`.
    pub(crate) async fn next(
        &mut self,
        io: &mut TcpStream,
        buf: &mut BytesMut,
    ) -> Result<Option<Bytes>, BodyError> {
        loop {
            match *self {
                Self::Done => return Ok(None),
                Self::Length(left) => {
                    if buf.is_empty() {
                        let want = usize::try_from(left).unwrap_or(PIECE).min(PIECE);
                        buf.reserve(want);
                        fill(io, buf).await?;
                    }
                    let (piece, left) = take(buf, left);
                    *self = if left == 0 {
                        Self::Done
                    } else {
                        Self::Length(left)
                    };
                    return Ok(Some(piece));
                }
                Self::Chunked(Chunked::Size) => match httparse::parse_chunk_size(buf) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        buf.advance(used);
                        *self = Self::Chunked(if size == 0 {
                            Chunked::Trailers
                        } else {
                            Chunked::Data(size)
                        });
                    }
                    Ok(httparse::Status::Partial) if buf.len() < MAX_LINE => {
                        buf.reserve(PIECE);
                        fill(io, buf).await?;
                    }
                    _ => return Err(BodyError::Incomplete("malformed chunk size")),
                },
                Self::Chunked(Chunked::Data(left)) => {
                    if buf.is_empty() {
                        buf.reserve(PIECE);
                        fill(io, buf).await?;
                    }
                    let (piece, left) = take(buf, left);
                    *self = Self::Chunked(if left == 0 {
                        Chunked::DataEnd
                    } else {
                        Chunked::Data(left)
                    });
                    return Ok(Some(piece));
                }
                Self::Chunked(Chunked::DataEnd) => {
                    if buf.len() < 2 {
                        buf.reserve(PIECE);
                        fill(io, buf).await?;
                        continue;
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(BodyError::Incomplete("a chunk did not end with CRLF"));
                    }
                    buf.advance(2);
                    *self = Self::Chunked(Chunked::Size);
                }
                Self::Chunked(Chunked::Trailers) => match buf.windows(2).position(|w| w == b"\r\n")
                {
                    Some(0) => {
                        buf.advance(2);
                        *self = Self::Done;
                    }
                    // A trailer field: read and ignored.
                    Some(end) => buf.advance(end + 2),
                    None if buf.len() < MAX_LINE => {
                        buf.reserve(PIECE);
                        fill(io, buf).await?;
                    }
                    None => return Err(BodyError::Incomplete("trailer line too long")),
                },
            }
        }
    }
}

/// Up to `left` bytes from the front of `buf`, and how many are left after.
fn take(buf: &mut BytesMut, left: u64) -> (Bytes, u64) {
    let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
    (buf.split_to(n).freeze(), left - n as u64)
}

/// Reads more into `buf`; the end of the stream is an error mid-body.
async fn fill(io: &mut TcpStream, buf: &mut BytesMut) -> Result<(), BodyError> {
    match io.read_buf(buf).await {
        Ok(0) | Err(_) => Err(BodyError::Incomplete("the client closed the connection")),
        Ok(_) => Ok(()),
    }
}
