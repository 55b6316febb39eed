//! One connection, request after request: read a head, hand the request to
//! the service, feed its body as the service reads it, write the answer as
//! it comes while watching for the client leaving.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use http::{Request, Response};
use http_body::Body as _;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, ReadBuf};
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use crate::body::{Body, BodyError, Decoder};
use crate::config::ServeConfig;
use crate::head::{self, HEAD_TOO_LARGE, Head, Refusal, RequestBody, URI_TOO_LONG};
use crate::inbound::{self, Demand, Feed};
use crate::transport::Transport;
use crate::writer::{self, End, ResponseBody, Writer};
use crate::{BoxError, PeerAddr};

/// First read buffer for a request head; it doubles up to the limit.
const HEAD_START: usize = 1024;
/// Bytes a connection may read past its head limit while waiting for a
/// head: the start of a body or of the next request, read with it.
pub const HEAD_SLACK: usize = 4 * 1024;
/// Bytes of response gathered into one write at most.
const WRITE_MAX: usize = 256 * 1024;
/// Bytes a client may send ahead (pipelined requests) while a response
/// streams. Past it they are dropped and the connection closes after the
/// response — the client retries what was not answered, as RFC 9112
/// §9.3.2 has it — so that the socket can still be read, and a client
/// that leaves still seen at once.
const PIPELINE_MAX: usize = 64 * 1024;
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
/// Bytes of an unread request body dropped to keep the connection (see
/// `Pump::drain_ready`).
const DRAIN_MAX: usize = 64 * 1024;

/// One connection until it closes, the client leaves, or `draining` fires
/// between requests.
pub(crate) async fn connection<T, S, B>(
    io: T,
    peer: Option<SocketAddr>,
    mut service: S,
    config: &ServeConfig,
    draining: &CancellationToken,
) where
    T: Transport,
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = bytes::Bytes>,
    B::Error: Into<BoxError>,
{
    let mut conn = Conn {
        io,
        buf: BytesMut::new(),
        peer,
        config,
    };
    match conn.run(&mut service, draining).await {
        // A peer that takes nothing would not take the FIN either, and the
        // kernel would go on holding what is queued for it: reset instead.
        Err(End::Stalled) => {
            tracing::debug!(?peer, "a client stopped reading; connection reset");
            conn.io.reset();
            return;
        }
        Err(end) => tracing::trace!(?end, "connection ended early"),
        Ok(()) => {}
    }
    let _ = writer::within(config.write_timeout, conn.io.shutdown()).await;
}

struct Conn<'c, T> {
    io: T,
    /// Bytes read and not used yet (a pipelined request, the start of a
    /// body); unallocated when empty.
    buf: BytesMut,
    peer: Option<SocketAddr>,
    config: &'c ServeConfig,
}

impl<T: Transport> Conn<'_, T> {
    async fn run<S, B>(&mut self, service: &mut S, draining: &CancellationToken) -> Result<(), End>
    where
        S: Service<Request<Body>, Response = Response<B>>,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = bytes::Bytes>,
        B::Error: Into<BoxError>,
    {
        loop {
            let head = match self.read_head(draining).await? {
                Some(Ok(head)) => head,
                Some(Err(refusal)) => {
                    let answer = head::refusal_response(&refusal, &self.buf);
                    writer::write_all(&mut self.io, &answer, &mut 0, self.config.write_timeout)
                        .await?;
                    return Err(End::Refused);
                }
                None => return Ok(()),
            };
            let keep_alive = self.exchange(head, service).await?;
            if !keep_alive || draining.is_cancelled() {
                return Ok(());
            }
        }
    }

    /// The next request head; `None` when the client closed (or the service
    /// drains) between requests.
    async fn read_head(
        &mut self,
        draining: &CancellationToken,
    ) -> Result<Option<Result<Head, Refusal>>, End> {
        let idle = self.buf.is_empty();
        let timeout = self.config.header_read_timeout;
        let read = self.read_head_bytes();
        let timed = async {
            match timeout {
                Some(limit) => tokio::time::timeout(limit, read)
                    .await
                    .unwrap_or(Err(End::TimedOut)),
                None => read.await,
            }
        };
        if idle {
            // Idle between requests: a drain closes the connection now.
            tokio::select! {
                head = timed => head,
                () = draining.cancelled() => Ok(None),
            }
        } else {
            timed.await
        }
    }

    /// Reads until a whole head is in the buffer, never holding more than
    /// the head limit and [`HEAD_SLACK`]; each byte is scanned for the
    /// head's end once, and the head parsed once it is all there.
    async fn read_head_bytes(&mut self) -> Result<Option<Result<Head, Refusal>>, End> {
        let limit = self.config.head_limit();
        let mut next = 0;
        loop {
            while let Some(end) = head::find_end(&self.buf, &mut next) {
                if end > limit {
                    return Ok(Some(Err(HEAD_TOO_LARGE)));
                }
                match head::parse(&self.buf[..end], self.config.header_limit()) {
                    Ok(Some(head)) => {
                        self.buf.advance(head.len);
                        return Ok(Some(Ok(head)));
                    }
                    // Empty lines before the request line: search on.
                    Ok(None) => {}
                    Err(refusal) => return Ok(Some(Err(refusal))),
                }
            }
            if self.buf.len() >= limit {
                // Not even the request line ended: its target is too long.
                let refusal = if self.buf.contains(&b'\n') {
                    HEAD_TOO_LARGE
                } else {
                    URI_TOO_LONG
                };
                return Ok(Some(Err(refusal)));
            }
            let room = limit + HEAD_SLACK - self.buf.len();
            if self.buf.capacity() == self.buf.len() {
                // Grown by copying into an exact allocation: `reserve`
                // could double past the limit.
                let capacity = (self.buf.len() * 2)
                    .max(HEAD_START)
                    .min(self.buf.len() + room);
                let mut bigger = BytesMut::with_capacity(capacity);
                bigger.extend_from_slice(&self.buf);
                self.buf = bigger;
            }
            let spare = self.buf.capacity() - self.buf.len();
            let mut limited = bytes::BufMut::limit(&mut self.buf, spare.min(room));
            match self.io.read_buf(&mut limited).await {
                Ok(0) if self.buf.is_empty() => return Ok(None),
                Ok(0) | Err(_) => return Err(End::Io),
                Ok(_) => {}
            }
        }
    }

    /// One request and its response; whether the connection stays open.
    async fn exchange<S, B>(&mut self, head: Head, service: &mut S) -> Result<bool, End>
    where
        S: Service<Request<Body>, Response = Response<B>>,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = bytes::Bytes>,
        B::Error: Into<BoxError>,
    {
        let Head {
            request,
            body: framing,
            keep_alive,
            expects_continue,
            ..
        } = head;
        let (mut parts, ()) = request.into_parts();
        if let Some(peer) = self.peer {
            parts.extensions.insert(PeerAddr(peer));
        }
        let method = parts.method.clone();
        let version = parts.version;
        // The body: already here in full (the usual small request), or read
        // from the socket as the handler asks.
        let (decoder, feed, body) = match framing {
            RequestBody::Length(0) => (Decoder::Done, None, Body::full(bytes::Bytes::new())),
            RequestBody::Length(n) if n <= self.buf.len() as u64 => {
                #[allow(clippy::cast_possible_truncation)] // n <= buf.len()
                let bytes = self.buf.split_to(n as usize).freeze();
                (Decoder::Done, None, Body::full(bytes))
            }
            RequestBody::Length(n) => {
                let (inbound, feed) = inbound::channel(Some(n));
                (Decoder::length(n), Some(feed), Body::streaming(inbound))
            }
            RequestBody::Chunked => {
                let (inbound, feed) = inbound::channel(None);
                (Decoder::chunked(), Some(feed), Body::streaming(inbound))
            }
        };
        self.release_buf();
        let mut pump = Pump {
            continue_due: expects_continue && feed.is_some(),
            continue_written: 0,
            decoder,
            feed,
            timeout: self.config.header_read_timeout,
            write_timeout: self.config.write_timeout,
        };
        let request = Request::from_parts(parts, body);
        if let Err(error) = poll_fn(|cx| service.poll_ready(cx)).await {
            tracing::debug!(error = %error.into(), "the service is not ready; closing the connection");
            return Err(End::ServiceFailed);
        }
        let response = {
            // Boxed: inline, the service's future (an axum router's is
            // large) would be part of every connection's task for its whole
            // life, idle streams included; boxed, it is freed once answered.
            let mut answer = Box::pin(service.call(request));
            let answer = loop {
                if !pump.active() {
                    break answer.as_mut().await;
                }
                tokio::select! {
                    biased;
                    answer = answer.as_mut() => break answer,
                    () = pump.step(&mut self.io, &mut self.buf) => {}
                }
            };
            match answer {
                Ok(response) => response,
                Err(error) => {
                    tracing::debug!(error = %error.into(), "the service failed; closing the connection");
                    return Err(End::ServiceFailed);
                }
            }
        };

        // The answer, in a block: its body is dropped at the end of it,
        // before any wait for the rest of the request's body.
        let (keep_alive, overflowed) = {
            let (mut parts, body) = response.into_parts();
            let mut body = pin!(body);
            let exact = if body.is_end_stream() {
                Some(0)
            } else {
                body.size_hint().exact()
            };
            let mut ctrl = BytesMut::with_capacity(256);
            pump.before_final_answer(&mut ctrl);
            let (framing, keep_alive) =
                writer::response_head(&mut parts, &method, version, exact, keep_alive, &mut ctrl);
            drop(parts);
            let mut writer = Writer::new(ctrl, framing, self.config.write_timeout);
            let mut overflowed = false;
            if framing == ResponseBody::None {
                writer.flush(&mut self.io).await?;
            } else {
                self.stream(body.as_mut(), &mut writer, &mut pump, &mut overflowed)
                    .await?;
            }
            (keep_alive, overflowed)
        };

        // A body the handler did not read to its end: go on feeding whoever
        // still holds it (a handler that answered first and reads the rest,
        // so the client can finish sending), for as long as a body may
        // pause; if nobody does, the rest of it is still on the wire and the
        // connection cannot carry another request.
        let rest = async {
            while pump.active() {
                pump.step(&mut self.io, &mut self.buf).await;
            }
        };
        match self.config.header_read_timeout {
            Some(limit) => {
                if tokio::time::timeout(limit, rest).await.is_err() {
                    return Ok(false);
                }
            }
            None => rest.await,
        }
        if keep_alive && !overflowed && pump.feed.is_none() {
            pump.drain_ready(&mut self.io, &mut self.buf).await;
        }
        Ok(keep_alive && !overflowed && pump.decoder.is_done())
    }

    /// Writes a response body as it comes, watching the socket meanwhile:
    /// a client that closes ends the stream at once.
    async fn stream<B>(
        &mut self,
        mut body: Pin<&mut B>,
        writer: &mut Writer,
        pump: &mut Pump,
        overflowed: &mut bool,
    ) -> Result<(), End>
    where
        B: http_body::Body<Data = bytes::Bytes>,
        B::Error: Into<BoxError>,
    {
        let mut poll_body = |cx: &mut std::task::Context<'_>| {
            body.as_mut()
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(Into::<BoxError>::into)))
        };
        loop {
            // Everything ready now goes out in one write.
            let mut ended = false;
            while writer.pending() < WRITE_MAX {
                match poll_fn(|cx| Poll::Ready(poll_body(cx))).await {
                    Poll::Ready(frame) => match writer.frame(frame) {
                        Ok(false) => {}
                        Ok(true) => {
                            ended = true;
                            break;
                        }
                        // What came before the failure still goes out.
                        Err(end) => {
                            let _ = writer.flush(&mut self.io).await;
                            return Err(end);
                        }
                    },
                    Poll::Pending => break,
                }
            }
            if ended {
                writer.finish()?;
                writer.flush(&mut self.io).await?;
                return Ok(());
            }
            if writer.pending() > 0 {
                writer.flush(&mut self.io).await?;
                continue;
            }
            // Idle: hold nothing while waiting.
            writer.release();
            self.release_buf();
            let reading = async {
                if pump.active() {
                    pump.step(&mut self.io, &mut self.buf).await;
                    Reading::Pumped
                } else if watch_closed(&mut self.io, &mut self.buf).await {
                    Reading::Closed
                } else {
                    Reading::Kept
                }
            };
            tokio::select! {
                // The body polled again: the waker it registered above fires
                // here too.
                frame = poll_fn(&mut poll_body) => {
                    let result = writer.frame(frame).and_then(|ended| {
                        if ended { writer.finish().map(|()| true) } else { Ok(false) }
                    });
                    match result {
                        Ok(false) => {}
                        Ok(true) => {
                            writer.flush(&mut self.io).await?;
                            return Ok(());
                        }
                        Err(end) => {
                            let _ = writer.flush(&mut self.io).await;
                            return Err(end);
                        }
                    }
                }
                reading = reading => match reading {
                    // The client left: dropping the body tells its run.
                    Reading::Closed => return Err(End::Io),
                    Reading::Kept => {
                        if self.buf.len() > PIPELINE_MAX {
                            self.buf = BytesMut::new();
                            *overflowed = true;
                        }
                    }
                    Reading::Pumped => {}
                },
            }
        }
    }

    /// Frees the read buffer when it holds nothing.
    fn release_buf(&mut self) {
        if self.buf.is_empty() && self.buf.capacity() > 0 {
            self.buf = BytesMut::new();
        }
    }
}

/// What reading the socket during a response came to.
enum Reading {
    Closed,
    Kept,
    Pumped,
}

/// Waits until the client sends something or leaves: `true` when it
/// closed (or the connection failed), `false` when bytes came (kept in
/// `buf`). Nothing is held while waiting but a scratch buffer on the stack
/// of each poll.
async fn watch_closed<T: AsyncRead + Unpin>(io: &mut T, buf: &mut BytesMut) -> bool {
    poll_fn(|cx| {
        let mut scratch = [0u8; 512];
        let mut read = ReadBuf::new(&mut scratch);
        match Pin::new(&mut *io).poll_read(cx, &mut read) {
            Poll::Ready(Ok(())) if read.filled().is_empty() => Poll::Ready(true),
            Poll::Ready(Ok(())) => {
                buf.extend_from_slice(read.filled());
                Poll::Ready(false)
            }
            Poll::Ready(Err(_)) => Poll::Ready(true),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Feeds a request body to its handler as it asks.
struct Pump {
    decoder: Decoder,
    feed: Option<Feed>,
    /// The client waits for `100 Continue` before sending the body, and the
    /// final answer has not begun.
    continue_due: bool,
    /// Bytes of `100 Continue` written (a write cut off by the final
    /// answer is finished before it).
    continue_written: usize,
    timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

impl Pump {
    /// Someone may still read the body.
    fn active(&self) -> bool {
        self.feed.is_some() && !self.decoder.is_done()
    }

    /// The final answer's head is about to go out: a `100 Continue` begun
    /// is finished first (a part of one would corrupt the answer), and one
    /// not begun is never sent after it (RFC 9110 §15.2: no 1xx after the
    /// final answer). A client still holding its body either sends it
    /// anyway or not at all; the connection reads what a handler asks for,
    /// and closes when the rest stays unread.
    fn before_final_answer(&mut self, out: &mut BytesMut) {
        if self.continue_due && self.continue_written > 0 {
            out.extend_from_slice(&CONTINUE[self.continue_written..]);
        }
        self.continue_due = false;
    }

    /// Nobody reads the rest of the body: drops what of it has already
    /// arrived (in the buffer, or ready on the socket), up to
    /// [`DRAIN_MAX`], so that the connection can carry the next request
    /// when the body is short — as hyper does. A body still on its way is
    /// not waited for: the connection closes, and the client retries what
    /// it had sent after it.
    async fn drain_ready<T: Transport>(&mut self, io: &mut T, buf: &mut BytesMut) {
        let mut drained = 0;
        while !self.decoder.is_done() && drained < DRAIN_MAX {
            let mut next = pin!(self.decoder.next(io, buf));
            match poll_fn(|cx| Poll::Ready(next.as_mut().poll(cx))).await {
                Poll::Ready(Ok(Some(piece))) => drained += piece.len(),
                Poll::Ready(Ok(None) | Err(_)) | Poll::Pending => return,
            }
        }
    }

    /// Waits for the reader to ask, then reads one piece and hands it over
    /// (or ends the body). Cancel-safe.
    async fn step<T: Transport>(&mut self, io: &mut T, buf: &mut BytesMut) {
        let Some(feed) = &self.feed else {
            return std::future::pending().await;
        };
        match poll_fn(|cx| match feed.demand(cx) {
            Demand::Wait => Poll::Pending,
            demand => Poll::Ready(demand),
        })
        .await
        {
            Demand::Gone | Demand::Wait => {
                self.feed = None;
                return;
            }
            Demand::Read => {}
        }
        if self.continue_due {
            // A client that does not take it will not send the body either:
            // reading it below meets the read deadline.
            let _ = writer::write_all(io, CONTINUE, &mut self.continue_written, self.write_timeout)
                .await;
            self.continue_due = false;
        }
        let piece = match self.timeout {
            Some(limit) => tokio::time::timeout(limit, self.decoder.next(io, buf))
                .await
                .unwrap_or(Err(BodyError::TimedOut)),
            None => self.decoder.next(io, buf).await,
        };
        match piece {
            Ok(Some(piece)) => {
                feed.give(piece);
                if self.decoder.is_done() {
                    feed.end(Ok(()));
                }
            }
            Ok(None) => feed.end(Ok(())),
            Err(error) => {
                feed.end(Err(error));
                self.feed = None;
                // The rest of the body is unknown: nothing more can be read
                // from this connection.
                self.decoder = Decoder::Broken;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads one head from `bytes`, written into a pipe in `piece`-byte
    /// writes: what it came to, and the read buffer's largest capacity.
    async fn read_one(config: &ServeConfig, bytes: Vec<u8>, piece: usize) -> (Option<u16>, usize) {
        let (client, server) = tokio::io::duplex(piece);
        let writer = tokio::spawn(async move {
            let mut client = client;
            for chunk in bytes.chunks(piece) {
                if client.write_all(chunk).await.is_err() {
                    break;
                }
            }
            client
        });
        let mut conn = Conn {
            io: server,
            buf: BytesMut::new(),
            peer: None,
            config,
        };
        let mut largest = 0;
        let outcome = loop {
            // One read at a time, so that the buffer is seen between reads.
            let step = tokio::time::timeout(Duration::from_millis(1), conn.read_head_bytes()).await;
            largest = largest.max(conn.buf.capacity());
            match step {
                Ok(Ok(Some(Ok(_)))) => break None,
                Ok(Ok(Some(Err(refusal)))) => break Some(refusal.status.as_u16()),
                Ok(Ok(None) | Err(_)) => break Some(0),
                Err(_) => {}
            }
        };
        drop(writer);
        (outcome, largest)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_head_flood_holds_no_more_than_the_limit_and_the_slack() {
        // `agwire serve`'s limit: 32 KiB of headers and 8 KiB of request line
        // (not a power of two, so a buffer grown by doubling would overshoot).
        let config = ServeConfig::default().max_head_bytes(40 * 1024);
        let limit = config.head_limit();
        // A header that never ends: refused at the limit, the buffer never
        // grown past it (doubling would have taken it to 64 KiB).
        let mut flood = b"GET / HTTP/1.1\r\nhost: a\r\nx: ".to_vec();
        flood.resize(1 << 20, b'a');
        let (outcome, largest) = read_one(&config, flood, 1000).await;
        assert_eq!(outcome, Some(431));
        assert!(
            largest <= limit + HEAD_SLACK,
            "held {largest} bytes for a {limit}-byte limit"
        );
        // A request line that never ends: 414, same bound.
        let mut flood = b"GET /".to_vec();
        flood.resize(1 << 20, b'a');
        let (outcome, largest) = read_one(&config, flood, 4096).await;
        assert_eq!(outcome, Some(414));
        assert!(largest <= limit + HEAD_SLACK, "held {largest} bytes");
        // A complete head just past the limit is refused too.
        let mut head = b"GET / HTTP/1.1\r\nhost: a\r\nx: ".to_vec();
        head.resize(limit + 10, b'a');
        head.extend_from_slice(b"\r\n\r\n");
        let (outcome, _) = read_one(&config, head, 1 << 16).await;
        assert_eq!(outcome, Some(431));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_head_dripped_in_small_pieces_is_parsed_once() {
        let config = ServeConfig::default().max_head_bytes(512 * 1024);
        let mut head = b"GET / HTTP/1.1\r\nhost: a\r\n".to_vec();
        while head.len() < 250_000 {
            head.extend_from_slice(b"x-filler: 0123456789012345678901234567890123456789\r\n");
        }
        head.extend_from_slice(b"\r\n");
        let config = config.max_headers(8192);
        head::PARSES.with(|parses| parses.set(0));
        let (outcome, _) = read_one(&config, head, 128).await;
        assert_eq!(outcome, None, "the head was taken");
        assert_eq!(head::PARSES.with(std::cell::Cell::get), 1);
    }
}
