#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod body;
mod chunked;
mod config;
mod conn;
mod head;
mod inbound;
mod peers;
mod serve;
mod transport;
mod writer;

pub use body::{Body, BodyError};
pub use config::{MAX_HEADERS_CEILING, MIN_HEAD_BYTES, ServeConfig};
pub use conn::HEAD_SLACK;
pub use serve::{serve, serve_connection, serve_with};
pub use transport::Transport;

/// The error a service or a response body may fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The client's address, in every request's extensions when the
/// connection is a TCP one [`serve_with`] accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// The parsers and the properties the fuzz targets (`fuzz/`) check, also
/// replayed over their corpora by the tests; not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    use bytes::BytesMut;

    pub use crate::chunked::{Chunked, MAX_EXTENSION_BYTES, MAX_TRAILER_BYTES, MAX_TRAILERS, Step};

    /// What parsing `bytes` as a request head comes to, the search for its
    /// end resumed after a first look at `bytes[..cut]` (as when a head
    /// arrives in two reads): `Ok(Some(length))`, `Ok(None)` while
    /// incomplete, or the status it is refused with.
    ///
    /// # Errors
    ///
    /// The status a malformed head is refused with.
    pub fn parse_head(bytes: &[u8], cut: usize, max_headers: usize) -> Result<Option<usize>, u16> {
        let mut next = 0;
        let cut = cut.min(bytes.len());
        // The first read: an end found in it is used as it would be.
        if let Some(found) = parse_from(&bytes[..cut], &mut next, max_headers)? {
            return Ok(Some(found));
        }
        parse_from(bytes, &mut next, max_headers)
    }

    fn parse_from(
        bytes: &[u8],
        next: &mut usize,
        max_headers: usize,
    ) -> Result<Option<usize>, u16> {
        while let Some(end) = crate::head::find_end(bytes, next) {
            match crate::head::parse(&bytes[..end], max_headers) {
                Ok(Some(head)) => return Ok(Some(head.len)),
                Ok(None) => {}
                Err(refusal) => return Err(refusal.status.as_u16()),
            }
        }
        Ok(None)
    }

    /// The head properties: however the bytes are split, the same result;
    /// a head's length is within the bytes; and it agrees with `httparse`
    /// given the whole input (a head we take is one it takes, ending at
    /// the same byte).
    ///
    /// # Panics
    ///
    /// When a property does not hold.
    pub fn check_head(bytes: &[u8]) {
        let whole = parse_head(bytes, bytes.len(), 64);
        let cut = bytes
            .first()
            .map_or(0, |&b| usize::from(b) * bytes.len() / 256);
        assert_eq!(parse_head(bytes, cut, 64), whole, "split at {cut}");
        if let Ok(Some(len)) = whole {
            assert!(len <= bytes.len());
            let mut fields = [httparse::EMPTY_HEADER; 64];
            let parsed = httparse::Request::new(&mut fields).parse(bytes);
            assert!(
                matches!(parsed, Ok(httparse::Status::Complete(l)) if l == len),
                "httparse: {parsed:?}, ours: {len}"
            );
        }
    }

    /// Decodes `bytes` as a chunked body fed in pieces of `piece` bytes:
    /// the body and the bytes left after it, `Ok(None)` when it did not end.
    ///
    /// # Errors
    ///
    /// The decoder's error.
    pub fn decode_chunked(
        bytes: &[u8],
        piece: usize,
    ) -> Result<Option<(Vec<u8>, usize)>, crate::BodyError> {
        let mut chunked = Chunked::new();
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut fed = 0;
        loop {
            match chunked.decode(&mut buf)? {
                Step::Data(data) => body.extend_from_slice(&data),
                Step::Done => return Ok(Some((body, buf.len() + bytes.len() - fed))),
                Step::NeedMore if fed == bytes.len() => return Ok(None),
                Step::NeedMore => {
                    let end = (fed + piece.max(1)).min(bytes.len());
                    buf.extend_from_slice(&bytes[fed..end]);
                    fed = end;
                }
            }
        }
    }

    /// The chunked properties: the result does not depend on how the bytes
    /// arrive; a decoded body is shorter than its encoding and what is left
    /// after it is the input's tail; and an encoding of the decoded body
    /// decodes to it again.
    ///
    /// # Panics
    ///
    /// When a property does not hold.
    pub fn check_chunked(bytes: &[u8]) {
        let whole = decode_chunked(bytes, bytes.len());
        let piece = bytes.first().map_or(1, |&b| usize::from(b % 17) + 1);
        assert_eq!(decode_chunked(bytes, 1), whole, "byte by byte");
        assert_eq!(decode_chunked(bytes, piece), whole, "pieces of {piece}");
        if let Ok(Some((body, left))) = whole {
            assert!(body.len() + left <= bytes.len());
            let mut again = format!("{:x}\r\n", body.len()).into_bytes();
            again.extend_from_slice(&body);
            again.extend_from_slice(b"\r\n0\r\n\r\n");
            let redone = if body.is_empty() {
                decode_chunked(b"0\r\n\r\n", 7)
            } else {
                decode_chunked(&again, 5)
            };
            assert_eq!(redone, Ok(Some((body, 0))));
        }
    }
}
