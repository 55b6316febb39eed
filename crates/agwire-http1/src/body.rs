//! Request bodies: [`Body`], what a handler reads, and the [`Decoder`] that
//! takes its bytes off the connection (a declared length, or chunks).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt as _};

use crate::chunked::{Chunked, Step};
use crate::inbound::Inbound;

/// Largest piece read from the socket at once for a body.
const PIECE: usize = 64 * 1024;

/// Why a request body ended before its last byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// The client closed the connection before the body's end.
    #[error("the request body was cut short: {0}")]
    Incomplete(&'static str),
    /// The body's framing broke the rules (chunked coding, RFC 9112 §7.1).
    #[error("the request body is malformed: {0}")]
    Malformed(&'static str),
    /// No byte arrived for longer than the connection's read timeout.
    #[error("the request body stopped arriving")]
    TimedOut,
}

/// A request's body, as the service reads it: empty, already read in full
/// (the usual small request), or read from the connection only as the
/// service asks for it.
#[derive(Debug)]
pub struct Body(Kind);

#[derive(Debug)]
enum Kind {
    Full(Option<Bytes>),
    Streaming(Inbound),
}

impl Body {
    pub(crate) fn full(bytes: Bytes) -> Self {
        Self(Kind::Full((!bytes.is_empty()).then_some(bytes)))
    }

    pub(crate) fn streaming(inbound: Inbound) -> Self {
        Self(Kind::Streaming(inbound))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match &mut self.get_mut().0 {
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Streaming(inbound) => Pin::new(inbound).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.0, Kind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Kind::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Streaming(inbound) => inbound.size_hint(),
        }
    }
}

/// Where a body being read stands.
#[derive(Debug)]
pub(crate) enum Decoder {
    /// This many bytes left of a declared length.
    Length(u64),
    Chunked(Chunked),
    /// Read to its end.
    Done,
    /// Broken off: the rest of it is unknown, so the connection cannot
    /// carry another request.
    Broken,
}

impl Decoder {
    pub(crate) fn length(n: u64) -> Self {
        if n == 0 { Self::Done } else { Self::Length(n) }
    }

    pub(crate) fn chunked() -> Self {
        Self::Chunked(Chunked::new())
    }

    pub(crate) fn is_done(&self) -> bool {
        matches!(self, Self::Done)
    }

    /// The next piece of the body (`None` at its end), from `buf` first and
    /// then the socket. Cancel-safe: the state moves only with bytes that
    /// are already in `buf`.
    pub(crate) async fn next<T: AsyncRead + Unpin>(
        &mut self,
        io: &mut T,
        buf: &mut BytesMut,
    ) -> Result<Option<Bytes>, BodyError> {
        let result = self.next_inner(io, buf).await;
        if result.is_err() {
            *self = Self::Broken;
        }
        result
    }

    async fn next_inner<T: AsyncRead + Unpin>(
        &mut self,
        io: &mut T,
        buf: &mut BytesMut,
    ) -> Result<Option<Bytes>, BodyError> {
        loop {
            match self {
                Self::Done => return Ok(None),
                Self::Broken => return Err(BodyError::Incomplete("an earlier error")),
                Self::Length(left) => {
                    if buf.is_empty() {
                        let want = usize::try_from(*left).unwrap_or(PIECE).min(PIECE);
                        fill(io, buf, want).await?;
                    }
                    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                    let piece = buf.split_to(n).freeze();
                    *left -= n as u64;
                    if *left == 0 {
                        *self = Self::Done;
                    }
                    return Ok(Some(piece));
                }
                Self::Chunked(chunked) => match chunked.decode(buf)? {
                    Step::Data(piece) => return Ok(Some(piece)),
                    Step::Done => *self = Self::Done,
                    Step::NeedMore => fill(io, buf, PIECE).await?,
                },
            }
        }
    }
}

/// Reads up to `want` more bytes into `buf`; the end of the stream is an
/// error mid-body.
async fn fill<T: AsyncRead + Unpin>(
    io: &mut T,
    buf: &mut BytesMut,
    want: usize,
) -> Result<(), BodyError> {
    buf.reserve(want);
    let mut limited = bytes::BufMut::limit(&mut *buf, want);
    match io.read_buf(&mut limited).await {
        Ok(0) | Err(_) => Err(BodyError::Incomplete("the client closed the connection")),
        Ok(_) => Ok(()),
    }
}
