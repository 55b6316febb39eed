//! HTTP/1.1 connections made for many long-lived event streams.
//!
//! Why not hyper's connection: hyper keeps an 8 KiB read buffer and an
//! 8 KiB write buffer for the life of every connection, and with 10,000
//! idle SSE streams open they were most of what a stream cost (13.8 KiB of
//! resident memory each, against 8.3 KiB for node). Here a connection holds
//! no buffer between writes: the request head is read into a buffer that is
//! released once parsed, a request body is read only as its handler asks
//! for it ([`inbound`]), and response pieces are written as they come, with
//! `writev`, without being copied into a connection buffer. An idle stream
//! is its task, its socket and its response body.
//!
//! What it does: request heads parsed by `httparse` (hyper's parser), bodies
//! by length or chunks (a request with both, or with lengths that disagree,
//! is refused), `Expect: 100-continue`, keep-alive and pipelined requests,
//! HTTP/1.0 clients, responses framed by length or in chunks (`HEAD`, 204
//! and 304 without a body), a `date` header, a deadline for each request
//! head (also the idle timeout between requests), a deadline for each
//! write (a client that stops reading is reset), and a client that leaves
//! mid-stream seen at once (its response body is dropped, which cancels the
//! run behind it). What it does not: HTTP/2 and protocol upgrades
//! (WebSockets) — AG-UI needs neither; serve those with `axum::serve`.

mod body;
mod head;
mod inbound;

use std::future::poll_fn;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::Request;
use bytes::{Buf, Bytes, BytesMut};
use http_body::Body as _;
use tokio::io::{AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use self::body::Decoder;
use self::head::{Head, Refusal, RequestBody, ResponseBody};
use self::inbound::{BodyError, Demand, Feed};

pub use self::inbound::BodyError as RequestBodyError;

/// Limits and timeouts of each connection [`serve_with`](crate::serve_with)
/// accepts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeConfig {
    /// Time a client has to send a request's head, counted from when the
    /// connection starts waiting for it: after connecting, and between
    /// requests on a kept-alive connection (so it is the idle timeout too).
    /// Also the longest pause inside a request body. `None`: no deadline.
    pub header_read_timeout: Option<Duration>,
    /// Longest a write may wait for the client to take bytes: a client that
    /// stops reading (its TCP window stays shut, which keep-alive probes
    /// cannot tell from a live peer) would otherwise hold its connection,
    /// its response and the kernel's send buffer for as long as it likes.
    /// Past it the connection is reset and the response body dropped.
    /// Any progress restarts it. `None`: no deadline.
    pub write_timeout: Option<Duration>,
    /// Largest request head (request line and headers); 431 above it.
    pub max_head_bytes: usize,
    /// Most headers in one request; 431 above it.
    pub max_headers: usize,
    /// TCP keep-alive probes after this long without traffic, to notice
    /// peers that vanished without closing (`None`: the system's default,
    /// usually off).
    pub tcp_keepalive: Option<Duration>,
    /// Once the shutdown begins, how long open connections get to finish
    /// their responses before `serve_with` returns anyway (`None`: as long
    /// as they take).
    pub drain_timeout: Option<Duration>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: Some(Duration::from_secs(30)),
            write_timeout: Some(Duration::from_secs(60)),
            max_head_bytes: 64 * 1024,
            max_headers: 100,
            tcp_keepalive: None,
            drain_timeout: None,
        }
    }
}

impl ServeConfig {
    /// [`ServeConfig::header_read_timeout`].
    #[must_use]
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// [`ServeConfig::write_timeout`].
    #[must_use]
    pub fn write_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// [`ServeConfig::max_head_bytes`].
    #[must_use]
    pub fn max_head_bytes(mut self, bytes: usize) -> Self {
        self.max_head_bytes = bytes;
        self
    }

    /// [`ServeConfig::max_headers`].
    #[must_use]
    pub fn max_headers(mut self, count: usize) -> Self {
        self.max_headers = count;
        self
    }

    /// [`ServeConfig::tcp_keepalive`].
    #[must_use]
    pub fn tcp_keepalive(mut self, idle: Option<Duration>) -> Self {
        self.tcp_keepalive = idle;
        self
    }

    /// [`ServeConfig::drain_timeout`].
    #[must_use]
    pub fn drain_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.drain_timeout = timeout;
        self
    }
}

/// First read buffer for a request head; it doubles up to the limit.
const HEAD_START: usize = 1024;
/// A response data frame up to this size is copied next to its framing
/// (one slice); a larger one is written from where it is.
const COPY_MAX: usize = 1024;
/// Bytes of response gathered into one write at most.
const WRITE_MAX: usize = 256 * 1024;

/// Why a connection ended early; logged at trace level only.
#[derive(Debug)]
enum End {
    Io,
    Refused,
    TimedOut,
    /// A write made no progress within the write timeout.
    Stalled,
}

/// One connection, request after request, until it closes or `draining`
/// fires between requests.
pub(crate) async fn connection(
    io: TcpStream,
    peer: SocketAddr,
    app: Router,
    config: &ServeConfig,
    draining: &CancellationToken,
) {
    let mut conn = Conn {
        io,
        buf: BytesMut::new(),
    };
    match conn.run(peer, app, config, draining).await {
        // A peer that takes nothing would not take the FIN either, and the
        // kernel would go on holding what is queued for it: reset instead.
        Err(End::Stalled) => {
            tracing::debug!(%peer, "a client stopped reading; connection reset");
            let _ = conn.io.set_zero_linger();
            return;
        }
        Err(end) => tracing::trace!(?end, "connection ended early"),
        Ok(()) => {}
    }
    let _ = conn.io.shutdown().await;
}

struct Conn {
    io: TcpStream,
    /// Bytes read and not used yet (a pipelined request, the start of a
    /// body); unallocated when empty.
    buf: BytesMut,
}

impl Conn {
    async fn run(
        &mut self,
        peer: SocketAddr,
        app: Router,
        config: &ServeConfig,
        draining: &CancellationToken,
    ) -> Result<(), End> {
        loop {
            let head = match self.read_head(config, draining).await? {
                Some(Ok(head)) => head,
                Some(Err(refusal)) => {
                    let answer = head::refusal_response(&refusal);
                    write_all(&mut self.io, &answer, config.write_timeout).await?;
                    return Err(End::Refused);
                }
                None => return Ok(()),
            };
            let keep_alive = self.exchange(head, peer, &app, config).await?;
            if !keep_alive || draining.is_cancelled() {
                return Ok(());
            }
        }
    }

    /// The next request head; `None` when the client closed (or the service
    /// drains) between requests.
    async fn read_head(
        &mut self,
        config: &ServeConfig,
        draining: &CancellationToken,
    ) -> Result<Option<Result<Head, Refusal>>, End> {
        let idle = self.buf.is_empty();
        let read = async {
            loop {
                if !self.buf.is_empty() {
                    match head::parse(&self.buf, config.max_headers) {
                        Ok(Some(head)) => {
                            self.buf.advance(head.len);
                            return Ok(Some(Ok(head)));
                        }
                        Ok(None) if self.buf.len() >= config.max_head_bytes => {
                            return Ok(Some(Err(Refusal {
                                status: axum::http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                                detail: "request head too large",
                            })));
                        }
                        Ok(None) => {}
                        Err(refusal) => return Ok(Some(Err(refusal))),
                    }
                }
                let room = (self.buf.capacity() - self.buf.len()).max(1);
                if room < 512 || self.buf.capacity() == 0 {
                    let grow = self.buf.len().max(HEAD_START).min(config.max_head_bytes);
                    self.buf.reserve(grow);
                }
                match self.io.read_buf(&mut self.buf).await {
                    Ok(0) if self.buf.is_empty() => return Ok(None),
                    Ok(0) | Err(_) => return Err(End::Io),
                    Ok(_) => {}
                }
            }
        };
        let timed = async {
            match config.header_read_timeout {
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

    /// One request and its response; whether the connection stays open.
    async fn exchange(
        &mut self,
        head: Head,
        peer: SocketAddr,
        app: &Router,
        config: &ServeConfig,
    ) -> Result<bool, End> {
        let Head {
            request,
            body: framing,
            keep_alive,
            expects_continue,
            ..
        } = head;
        let (mut parts, ()) = request.into_parts();
        parts.extensions.insert(ConnectInfo(peer));
        let method = parts.method.clone();
        let version = parts.version;
        // The body: already here in full (the usual small request), or read
        // from the socket as the handler asks.
        let mut decoder = match framing {
            RequestBody::Length(n) => Decoder::length(n),
            RequestBody::Chunked => Decoder::chunked(),
        };
        let mut feed = None;
        let body = match framing {
            RequestBody::Length(0) => axum::body::Body::empty(),
            RequestBody::Length(n) if n <= self.buf.len() as u64 => {
                decoder = Decoder::Done;
                #[allow(clippy::cast_possible_truncation)] // n <= buf.len()
                axum::body::Body::from(self.buf.split_to(n as usize).freeze())
            }
            RequestBody::Length(n) => {
                let (inbound, f) = inbound::channel(Some(n));
                feed = Some(f);
                axum::body::Body::new(inbound)
            }
            RequestBody::Chunked => {
                let (inbound, f) = inbound::channel(None);
                feed = Some(f);
                axum::body::Body::new(inbound)
            }
        };
        self.release_buf();
        let request = Request::from_parts(parts, body);
        let mut pump = Pump {
            decoder,
            feed,
            continue_due: expects_continue,
            timeout: config.header_read_timeout,
            write_timeout: config.write_timeout,
        };
        let mut answer = Box::pin(app.clone().oneshot(request));
        let response = loop {
            if !pump.active() {
                match answer.as_mut().await {
                    Ok(response) => break response,
                    Err(never) => match never {},
                }
            }
            tokio::select! {
                biased;
                answer = answer.as_mut() => match answer {
                    Ok(response) => break response,
                    Err(never) => match never {},
                },
                () = pump.step(&mut self.io, &mut self.buf) => {}
            }
        };
        drop(answer);

        let (mut parts, mut body) = response.into_parts();
        let exact = if body.is_end_stream() {
            Some(0)
        } else {
            body.size_hint().exact()
        };
        let mut ctrl = BytesMut::with_capacity(256);
        let (framing, keep_alive) =
            head::write_response_head(&mut parts, &method, version, exact, keep_alive, &mut ctrl);
        drop(parts);
        let mut writer = Writer {
            pieces: Vec::new(),
            ctrl,
            framing,
            sent: 0,
            timeout: config.write_timeout,
        };
        if framing == ResponseBody::None {
            drop(body);
            writer.flush(&mut self.io).await?;
        } else {
            self.stream(&mut body, &mut writer, &mut pump).await?;
            drop(body);
        }
        drop(writer);

        // A body the handler did not read to its end: go on feeding whoever
        // still holds it (a handler that answered first and reads the rest,
        // so the client can finish sending); if nobody does, the rest of it
        // is still on the wire and the connection cannot carry another
        // request.
        while pump.active() {
            pump.step(&mut self.io, &mut self.buf).await;
        }
        Ok(keep_alive && pump.decoder.is_done())
    }

    /// Writes a response body as it comes, watching the socket meanwhile:
    /// a client that closes ends the stream at once.
    async fn stream(
        &mut self,
        body: &mut axum::body::Body,
        writer: &mut Writer,
        pump: &mut Pump,
    ) -> Result<(), End> {
        let mut watch = true;
        loop {
            // Everything ready now goes out in one write.
            let mut ended = false;
            while writer.pending() < WRITE_MAX {
                match poll_fn(|cx| Poll::Ready(Pin::new(&mut *body).poll_frame(cx))).await {
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
                } else if watch {
                    if watch_closed(&self.io, &mut self.buf).await {
                        Reading::Closed
                    } else {
                        Reading::Kept
                    }
                } else {
                    std::future::pending().await
                }
            };
            tokio::select! {
                // The body polled again: the waker it registered above fires
                // here too.
                frame = poll_fn(|cx| match Pin::new(&mut *body).poll_frame(cx) {
                    Poll::Pending => Poll::Pending,
                    ready => Poll::Ready(ready),
                }) => {
                    if let Poll::Ready(frame) = frame
                        && writer.frame(frame)?
                    {
                        writer.finish()?;
                        writer.flush(&mut self.io).await?;
                        return Ok(());
                    }
                }
                reading = reading => match reading {
                    // The client left: dropping the body tells its run.
                    Reading::Closed => return Err(End::Io),
                    // It sent more (a pipelined request): kept for later;
                    // past 64 KiB the socket is no longer read.
                    Reading::Kept => watch = self.buf.len() < 64 * 1024,
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

/// Waits until the socket is readable and reads what is there: `true` when
/// the client closed (or the connection failed), `false` when bytes came
/// (kept in `buf`).
async fn watch_closed(io: &TcpStream, buf: &mut BytesMut) -> bool {
    loop {
        if io.readable().await.is_err() {
            return true;
        }
        let mut scratch = [0u8; 512];
        match io.try_read(&mut scratch) {
            Ok(0) => return true,
            Ok(n) => {
                buf.extend_from_slice(&scratch[..n]);
                return false;
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return true,
        }
    }
}

/// Feeds a request body to its handler as it asks.
struct Pump {
    decoder: Decoder,
    feed: Option<Feed>,
    /// `Expect: 100-continue` not answered yet.
    continue_due: bool,
    timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

impl Pump {
    /// Someone may still read the body.
    fn active(&self) -> bool {
        self.feed.is_some() && !self.decoder.is_done()
    }

    /// Waits for the reader to ask, then reads one piece and hands it over
    /// (or ends the body). Cancel-safe.
    async fn step(&mut self, io: &mut TcpStream, buf: &mut BytesMut) {
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
        if std::mem::take(&mut self.continue_due) {
            // A client that does not take it will not send the body either:
            // reading it below meets the read deadline.
            let _ = write_all(io, b"HTTP/1.1 100 Continue\r\n\r\n", self.write_timeout).await;
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
                self.decoder = Decoder::Length(1);
            }
        }
    }
}

/// A response on its way out: framing bytes and small frames in `ctrl`,
/// large frames as they are, written together with `writev`.
struct Writer {
    pieces: Vec<Bytes>,
    ctrl: BytesMut,
    framing: ResponseBody,
    /// Body bytes sent (checked against a declared length).
    sent: u64,
    /// [`ServeConfig::write_timeout`], for each write.
    timeout: Option<Duration>,
}

impl Writer {
    fn pending(&self) -> usize {
        self.ctrl.len() + self.pieces.iter().map(Bytes::len).sum::<usize>()
    }

    /// Takes what the body gave: `true` at its end; a body that failed
    /// ends the connection (the client sees the response cut short, never
    /// a complete-looking one).
    fn frame(
        &mut self,
        frame: Option<Result<http_body::Frame<Bytes>, axum::Error>>,
    ) -> Result<bool, End> {
        match frame {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    self.data(data);
                }
                Ok(false)
            }
            Some(Err(error)) => {
                tracing::debug!(%error, "a response body failed; closing the connection");
                Err(End::Io)
            }
            None => Ok(true),
        }
    }

    fn data(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        self.sent += data.len() as u64;
        let chunked = self.framing == ResponseBody::Chunked;
        if chunked {
            head::chunk_size_line(data.len(), &mut self.ctrl);
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
    }

    /// The body ended: the last chunk, or a check of the declared length.
    fn finish(&mut self) -> Result<(), End> {
        match self.framing {
            ResponseBody::Chunked => self.ctrl.extend_from_slice(b"0\r\n\r\n"),
            ResponseBody::Length(n) if n != self.sent => {
                tracing::debug!(
                    declared = n,
                    sent = self.sent,
                    "a response body did not match its length"
                );
                return Err(End::Io);
            }
            _ => {}
        }
        Ok(())
    }

    /// Frees the buffers while nothing is pending.
    fn release(&mut self) {
        self.pieces = Vec::new();
        self.ctrl = BytesMut::new();
    }

    async fn flush(&mut self, io: &mut TcpStream) -> Result<(), End> {
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

/// Writes all of `bytes`, each write within `limit`.
async fn write_all(
    io: &mut TcpStream,
    mut bytes: &[u8],
    limit: Option<Duration>,
) -> Result<(), End> {
    while !bytes.is_empty() {
        let written = within(limit, io.write(bytes)).await?.map_err(|_| End::Io)?;
        if written == 0 {
            return Err(End::Io);
        }
        bytes = &bytes[written..];
    }
    Ok(())
}

/// One write, given up as [`End::Stalled`] past `limit`.
async fn within<T>(limit: Option<Duration>, write: impl Future<Output = T>) -> Result<T, End> {
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
