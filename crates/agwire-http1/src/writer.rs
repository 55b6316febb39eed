//! Responses out: the head (the connection decides the framing, whatever
//! the handler's own framing headers say) and the body, written as it
//! comes with `writev`, holding nothing between writes.

use std::fmt::Write as _;
use std::future::poll_fn;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode, Version};
use tokio::io::{AsyncWrite, AsyncWriteExt as _};

use crate::head::connection_has;

/// Why a connection ended early (most causes are the writer's); logged at
/// trace level only.
#[derive(Debug)]
pub(crate) enum End {
    Io,
    Refused,
    TimedOut,
    /// A write made no progress within the write timeout.
    Stalled,
    /// The response body failed, or ended short of its declared length.
    BodyFailed,
    /// The response body ran past its declared length.
    Overlong,
    /// The service answered with an error instead of a response.
    ServiceFailed,
}

/// A response data frame up to this size is copied next to its framing
/// (one slice); a larger one is written from where it is.
const COPY_MAX: usize = 1024;

/// How a response's body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResponseBody {
    /// No body at all (HEAD, 1xx, 204, 304).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes (an HTTP/1.0 client and no length).
    UntilClose,
}

/// The handler's `Content-Length`, when it is one valid number (repeated
/// or comma-separated copies of it included).
fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    let mut length = None;
    for value in &headers.get_all(header::CONTENT_LENGTH) {
        for part in value.to_str().ok()?.split(',') {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n = part.parse::<u64>().ok()?;
            if length.is_some_and(|l| l != n) {
                return None;
            }
            length = Some(n);
        }
    }
    length
}

/// Writes the status line and headers of `parts` to `out`, choosing the
/// body's framing. The framing headers are the connection's: the
/// handler's `Transfer-Encoding` and `Connection` are replaced (a
/// `Connection: close` is honoured), its `Content-Length` is kept only
/// where it describes the body (a body that knows its size overrides it),
/// and a body of unknown size goes in chunks (closing the connection for
/// an HTTP/1.0 client). A `HEAD` answer carries the length its `GET` would
/// have when the handler or the body says it, and none otherwise (never a
/// made-up 0). Returns the framing and whether the connection may stay open
/// after this response.
pub(crate) fn response_head(
    parts: &mut http::response::Parts,
    request_method: &Method,
    request_version: Version,
    exact_len: Option<u64>,
    mut keep_alive: bool,
    out: &mut BytesMut,
) -> (ResponseBody, bool) {
    let status = parts.status;
    let headers = &mut parts.headers;
    if connection_has(headers, "close") {
        keep_alive = false;
    }
    let declared = declared_length(headers);
    headers.remove(header::CONNECTION);
    headers.remove(header::TRANSFER_ENCODING);
    headers.remove(header::CONTENT_LENGTH);
    let head = request_method == Method::HEAD;
    let framing = if status.is_informational() || status == StatusCode::NO_CONTENT {
        ResponseBody::None
    } else if status == StatusCode::NOT_MODIFIED {
        // The length of the representation it stands for, if said.
        if let Some(n) = declared {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        ResponseBody::None
    } else if head {
        let n = declared.or(exact_len.filter(|&n| n > 0));
        if let Some(n) = n {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        ResponseBody::None
    } else if let Some(n) = exact_len.or(declared) {
        if declared.is_some_and(|d| d != n) {
            tracing::debug!(
                declared = ?declared,
                actual = n,
                "a response's content-length did not match its body; the body's size is sent"
            );
        }
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        ResponseBody::Length(n)
    } else if request_version == Version::HTTP_11 {
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        ResponseBody::Chunked
    } else {
        keep_alive = false;
        ResponseBody::UntilClose
    };
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.extend_from_slice(b" ");
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers.iter() {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !headers.contains_key(header::DATE) {
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !keep_alive {
        out.extend_from_slice(b"connection: close\r\n");
    } else if request_version == Version::HTTP_10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    (framing, keep_alive)
}

/// The line that starts a chunk of `len` bytes.
fn chunk_size_line(len: usize, out: &mut BytesMut) {
    let mut line = String::with_capacity(18);
    let _ = write!(line, "{len:x}\r\n");
    out.extend_from_slice(line.as_bytes());
}

/// A response on its way out: framing bytes and small frames in `ctrl`,
/// large frames as they are, written together with `writev`.
pub(crate) struct Writer {
    pieces: Vec<Bytes>,
    ctrl: BytesMut,
    framing: ResponseBody,
    /// Body bytes taken (checked against a declared length).
    sent: u64,
    /// [`ServeConfig::write_timeout`](crate::ServeConfig::write_timeout),
    /// for each write.
    timeout: Option<Duration>,
}

impl Writer {
    /// A writer whose first bytes are `head`.
    pub(crate) fn new(head: BytesMut, framing: ResponseBody, timeout: Option<Duration>) -> Self {
        Self {
            pieces: Vec::new(),
            ctrl: head,
            framing,
            sent: 0,
            timeout,
        }
    }

    pub(crate) fn pending(&self) -> usize {
        self.ctrl.len() + self.pieces.iter().map(Bytes::len).sum::<usize>()
    }

    /// Takes what the body gave: `true` at its end; a body that failed
    /// ends the connection (the client sees the response cut short, never
    /// a complete-looking one).
    pub(crate) fn frame<E: std::fmt::Display>(
        &mut self,
        frame: Option<Result<http_body::Frame<Bytes>, E>>,
    ) -> Result<bool, End> {
        match frame {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    self.data(data)?;
                }
                Ok(false)
            }
            Some(Err(error)) => {
                tracing::debug!(%error, "a response body failed; closing the connection");
                Err(End::BodyFailed)
            }
            None => Ok(true),
        }
    }

    /// Queues body bytes. Past a declared length nothing more is queued:
    /// the bytes that fit go out, then the connection closes
    /// ([`End::Overlong`]) — bytes past the length would be read by the
    /// client as the start of the next response.
    fn data(&mut self, mut data: Bytes) -> Result<(), End> {
        if data.is_empty() {
            return Ok(());
        }
        let mut overlong = false;
        if let ResponseBody::Length(n) = self.framing {
            let room = n.saturating_sub(self.sent);
            if data.len() as u64 > room {
                #[allow(clippy::cast_possible_truncation)] // room < data.len()
                data.truncate(room as usize);
                overlong = true;
            }
        }
        self.sent += data.len() as u64;
        let chunked = self.framing == ResponseBody::Chunked;
        if chunked {
            chunk_size_line(data.len(), &mut self.ctrl);
        }
        if data.len() <= COPY_MAX {
            self.ctrl.extend_from_slice(&data);
        } else {
            if !self.ctrl.is_empty() {
                self.pieces.push(self.ctrl.split().freeze());
            }
            self.pieces.push(data);
        }
        if chunked {
            self.ctrl.extend_from_slice(b"\r\n");
        }
        if overlong {
            tracing::debug!(
                declared = self.sent,
                "a response body ran past its length; closing the connection"
            );
            return Err(End::Overlong);
        }
        Ok(())
    }

    /// The body ended: the last chunk, or a check of the declared length.
    pub(crate) fn finish(&mut self) -> Result<(), End> {
        match self.framing {
            ResponseBody::Chunked => self.ctrl.extend_from_slice(b"0\r\n\r\n"),
            ResponseBody::Length(n) if n != self.sent => {
                tracing::debug!(
                    declared = n,
                    sent = self.sent,
                    "a response body ended short of its length; closing the connection"
                );
                return Err(End::BodyFailed);
            }
            _ => {}
        }
        Ok(())
    }

    /// Frees the buffers while nothing is pending.
    pub(crate) fn release(&mut self) {
        self.pieces = Vec::new();
        self.ctrl = BytesMut::new();
    }

    pub(crate) async fn flush<T: AsyncWrite + Unpin>(&mut self, io: &mut T) -> Result<(), End> {
        if !self.ctrl.is_empty() {
            self.pieces.push(self.ctrl.split().freeze());
        }
        let mut first = 0;
        while first < self.pieces.len() {
            let pieces = &self.pieces[first..];
            let write = poll_fn(|cx| {
                let mut slices = [IoSlice::new(&[]); 64];
                let count = pieces.len().min(slices.len());
                for (slice, piece) in slices.iter_mut().zip(pieces) {
                    *slice = IoSlice::new(piece);
                }
                Pin::new(&mut *io).poll_write_vectored(cx, &slices[..count])
            });
            let written = within(self.timeout, write).await?.map_err(|_| End::Io)?;
            if written == 0 {
                return Err(End::Io);
            }
            let mut left = written;
            while left > 0 {
                let piece = &mut self.pieces[first];
                if left >= piece.len() {
                    left -= piece.len();
                    first += 1;
                } else {
                    piece.advance(left);
                    left = 0;
                }
            }
        }
        self.pieces.clear();
        Ok(())
    }
}

/// Writes all of `bytes`, each write within `limit`; `progress` counts
/// what was written, so that a caller cancelled mid-way knows (the write
/// of an interim `100 Continue` that a final answer overtakes).
pub(crate) async fn write_all<T: AsyncWrite + Unpin>(
    io: &mut T,
    bytes: &[u8],
    progress: &mut usize,
    limit: Option<Duration>,
) -> Result<(), End> {
    while *progress < bytes.len() {
        let written = within(limit, io.write(&bytes[*progress..]))
            .await?
            .map_err(|_| End::Io)?;
        if written == 0 {
            return Err(End::Io);
        }
        *progress += written;
    }
    Ok(())
}

/// One write, given up as [`End::Stalled`] past `limit`.
pub(crate) async fn within<T>(
    limit: Option<Duration>,
    write: impl Future<Output = T>,
) -> Result<T, End> {
    let mut write = std::pin::pin!(write);
    // Most writes are taken at once: only one that waits arms a timer.
    if let Poll::Ready(done) = poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await {
        return Ok(done);
    }
    match limit {
        Some(limit) => tokio::time::timeout(limit, write)
            .await
            .map_err(|_| End::Stalled),
        None => Ok(write.await),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(
        status: StatusCode,
        method: &Method,
        version: Version,
        len: Option<u64>,
        headers: &[(&str, &str)],
    ) -> (ResponseBody, bool, String) {
        let mut builder = http::Response::builder().status(status);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let (mut parts, ()) = builder
            .body(())
            .map(http::Response::into_parts)
            .expect("response");
        let mut out = BytesMut::new();
        let (framing, keep) = response_head(&mut parts, method, version, len, true, &mut out);
        (
            framing,
            keep,
            String::from_utf8(out.to_vec()).unwrap_or_default(),
        )
    }

    #[test]
    fn the_response_head_frames_its_body() {
        let (framing, keep, text) =
            frame(StatusCode::OK, &Method::POST, Version::HTTP_11, None, &[]);
        assert_eq!((framing, keep), (ResponseBody::Chunked, true));
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(text.contains("transfer-encoding: chunked\r\n"));
        let (framing, _, text) =
            frame(StatusCode::OK, &Method::GET, Version::HTTP_11, Some(3), &[]);
        assert_eq!(framing, ResponseBody::Length(3));
        assert!(text.contains("content-length: 3\r\n"));
        let (framing, keep, text) =
            frame(StatusCode::OK, &Method::GET, Version::HTTP_10, None, &[]);
        assert_eq!((framing, keep), (ResponseBody::UntilClose, false));
        assert!(text.contains("connection: close\r\n"));
        let (framing, _, text) = frame(
            StatusCode::NO_CONTENT,
            &Method::GET,
            Version::HTTP_11,
            Some(0),
            &[],
        );
        assert_eq!(framing, ResponseBody::None);
        assert!(!text.contains("content-length"));
    }

    #[test]
    fn a_head_answer_has_its_gets_length_or_none() {
        // axum empties a HEAD answer's body: no made-up `content-length: 0`.
        let (framing, _, text) = frame(
            StatusCode::OK,
            &Method::HEAD,
            Version::HTTP_11,
            Some(0),
            &[],
        );
        assert_eq!(framing, ResponseBody::None);
        assert!(!text.contains("content-length"), "{text}");
        let (_, _, text) = frame(
            StatusCode::OK,
            &Method::HEAD,
            Version::HTTP_11,
            Some(0),
            &[("content-length", "5")],
        );
        assert!(text.contains("content-length: 5\r\n"), "{text}");
        let (_, _, text) = frame(
            StatusCode::OK,
            &Method::HEAD,
            Version::HTTP_11,
            Some(7),
            &[],
        );
        assert!(text.contains("content-length: 7\r\n"), "{text}");
    }

    #[test]
    fn the_handlers_framing_headers_are_replaced() {
        let (framing, keep, text) = frame(
            StatusCode::OK,
            &Method::GET,
            Version::HTTP_11,
            Some(2),
            &[
                ("content-length", "10"),
                ("transfer-encoding", "gzip"),
                ("connection", "close, upgrade"),
            ],
        );
        assert_eq!((framing, keep), (ResponseBody::Length(2), false));
        assert!(text.contains("content-length: 2\r\n"), "{text}");
        assert!(!text.contains("content-length: 10"), "{text}");
        assert!(
            !text.contains("gzip") && !text.contains("upgrade"),
            "{text}"
        );
        assert_eq!(text.matches("connection: close\r\n").count(), 1, "{text}");
        // A length the body does not know: the handler's, enforced.
        let (framing, _, _) = frame(
            StatusCode::OK,
            &Method::GET,
            Version::HTTP_11,
            None,
            &[("content-length", "4")],
        );
        assert_eq!(framing, ResponseBody::Length(4));
        // Not a number: chunks.
        let (framing, _, text) = frame(
            StatusCode::OK,
            &Method::GET,
            Version::HTTP_11,
            None,
            &[("content-length", "4x")],
        );
        assert_eq!(framing, ResponseBody::Chunked);
        assert!(!text.contains("4x"));
    }

    #[test]
    fn a_body_past_its_length_is_cut_at_it() {
        let mut writer = Writer::new(BytesMut::new(), ResponseBody::Length(3), None);
        assert!(writer.data(Bytes::from_static(b"ab")).is_ok());
        assert!(matches!(
            writer.data(Bytes::from_static(b"cdef")),
            Err(End::Overlong)
        ));
        assert_eq!(&writer.ctrl[..], b"abc");
    }
}
