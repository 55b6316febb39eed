//! Response bodies: events encoded as they arrive, in the negotiated format.
//!
//! [`Framer`] is what both bodies share — encoding (SSE with optional `id:`
//! lines, or protobuf frames), batching of events that are ready together
//! into one chunk, keep-alive comments on an idle SSE stream, and the one
//! answer to an event that cannot be encoded. [`EventBody`] feeds it from an
//! [`AgentEndpoint`](crate::AgentEndpoint)'s run; [`EventStream`] from any
//! stream of `(seq, event)` pairs.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use agwire_codec::negotiate::WireFormat;
use agwire_codec::sse::SseEncoder;
use agwire_core::Event;
#[cfg(feature = "proto")]
use agwire_core::RunErrorEvent;
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use futures_core::Stream;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::agent::BoxFuture;
use crate::context::DisconnectPolicy;
use crate::queue;

/// Default keep-alive period: a comment frame after 15 s without events, well
/// inside the idle timeouts of common proxies.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Events ready together are written as one chunk up to about this size: one
/// write per burst instead of one per event, without holding back a stream.
const BATCH_BYTES: usize = 32 * 1024;

/// Encodes one response's events into chunks.
#[derive(Debug)]
struct Framer {
    format: WireFormat,
    /// Empty (and unallocated) between chunks: an idle stream holds nothing.
    buf: Vec<u8>,
    /// The keep-alive period; SSE only: protobuf has no comment frame.
    keep_alive: Option<Duration>,
    /// Started on the first poll (in the runtime), not at construction.
    timer: Option<Interval>,
}

impl Framer {
    fn new(format: WireFormat, keep_alive: Option<Duration>) -> Self {
        Self {
            format,
            buf: Vec::new(),
            keep_alive: keep_alive.filter(|_| format == WireFormat::Sse),
            timer: None,
        }
    }

    /// Appends one event (SSE: with `id: <id>` when given). False when it
    /// cannot be encoded: a `RUN_ERROR` with code `encoding_error` is
    /// appended instead, and the stream must end after it.
    fn push(&mut self, id: Option<u64>, event: &Event) -> bool {
        match self.format {
            WireFormat::Sse => {
                match id {
                    Some(id) => SseEncoder::new().encode_with_id(id, event, &mut self.buf),
                    None => SseEncoder::new().encode(event, &mut self.buf),
                }
                true
            }
            WireFormat::Protobuf => encode_proto(event, &mut self.buf),
        }
    }

    fn is_full(&self) -> bool {
        self.buf.len() >= BATCH_BYTES
    }

    /// What was appended since the last chunk, as a chunk.
    fn take(&mut self) -> Option<Bytes> {
        if self.buf.is_empty() {
            return None;
        }
        if let Some(timer) = &mut self.timer {
            timer.reset();
        }
        Some(Bytes::from(std::mem::take(&mut self.buf)))
    }

    /// A keep-alive comment once a period passed without a chunk.
    fn poll_keep_alive(&mut self, cx: &mut Context<'_>) -> Poll<Bytes> {
        let Some(period) = self.keep_alive else {
            return Poll::Pending;
        };
        self.timer
            .get_or_insert_with(|| {
                let mut timer = tokio::time::interval_at(Instant::now() + period, period);
                timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
                timer
            })
            .poll_tick(cx)
            .map(|_| Bytes::from_static(b": keep-alive\n\n"))
    }
}

#[cfg(feature = "proto")]
fn encode_proto(event: &Event, buf: &mut Vec<u8>) -> bool {
    match agwire_codec::proto::encode_frame(event, buf) {
        Ok(()) => true,
        Err(err) => {
            tracing::error!(%err, "event cannot be sent as protobuf; ending the stream");
            let error = Event::RunError(
                RunErrorEvent::new(format!("event cannot be encoded as protobuf: {err}"))
                    .code("encoding_error"),
            );
            let _ = agwire_codec::proto::encode_frame(&error, buf);
            false
        }
    }
}

#[cfg(not(feature = "proto"))]
fn encode_proto(_: &Event, _: &mut Vec<u8>) -> bool {
    unreachable!("protobuf is never negotiated without the proto feature")
}

/// A `200` streaming `body` in `format`, with the headers every event
/// stream carries: its content type, `Cache-Control: no-store` and
/// `X-Accel-Buffering: no` (so nginx does not hold events back).
pub(crate) fn stream_response(body: Body, format: WireFormat) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Fires the run's cancellation when the body is dropped before the run's
/// queue closed, i.e. when the client went away mid-run.
#[derive(Debug)]
struct CancelOnDrop {
    token: CancellationToken,
    policy: DisconnectPolicy,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed && self.policy == DisconnectPolicy::Cancel {
            tracing::debug!("client disconnected mid-run; cancelling the run");
            self.token.cancel();
        }
    }
}

/// An endpoint's body: the run's events, for `Body::from_stream`.
///
/// It also drives the run: the agent's future is polled here, on the
/// connection's task, so a run needs no task of its own and no wake-up
/// across threads, and events the agent emits in one go leave in one write.
/// The queue still bounds what the agent may emit ahead of the client.
pub(crate) struct EventBody {
    run: Option<BoxFuture<'static, ()>>,
    rx: queue::EventReceiver,
    framer: Framer,
    /// Next SSE `id:` when ids are written.
    next_id: Option<u64>,
    guard: CancelOnDrop,
    done: bool,
}

impl std::fmt::Debug for EventBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBody")
            .field("running", &self.run.is_some())
            .field("framer", &self.framer)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Drop for EventBody {
    fn drop(&mut self) {
        // The client left mid-run. The run moves to a task of its own rather
        // than being dropped at whatever await it was in: under `Cancel` the
        // guard fires its token (and its emitters fail), so it winds down
        // through its own cleanup; under `Finish` it simply goes on.
        if let Some(run) = self.run.take()
            && self.guard.armed
        {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(run);
                }
                Err(_) => tracing::warn!("no runtime to finish a disconnected run on"),
            }
        }
    }
}

impl EventBody {
    pub(crate) fn new(
        run: BoxFuture<'static, ()>,
        rx: queue::EventReceiver,
        format: WireFormat,
        keep_alive: Option<Duration>,
        sse_ids: bool,
        token: CancellationToken,
        policy: DisconnectPolicy,
    ) -> Self {
        Self {
            run: Some(run),
            rx,
            framer: Framer::new(format, keep_alive),
            next_id: sse_ids.then_some(1),
            guard: CancelOnDrop {
                token,
                policy,
                armed: true,
            },
            done: false,
        }
    }
}

impl Stream for EventBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        while !this.framer.is_full() {
            // Let the agent run until it waits (for I/O, or for room in the
            // queue), then take what it emitted; repeat while that frees room.
            if let Some(run) = &mut this.run
                && run.as_mut().poll(cx).is_ready()
            {
                this.run = None;
            }
            let (framer, next_id) = (&mut this.framer, &mut this.next_id);
            let mut failed = false;
            let drained = this.rx.poll_drain(cx, |event| {
                let id = next_id.as_mut().map(|n| {
                    *n += 1;
                    *n - 1
                });
                failed = !framer.push(id, &event);
                !failed && !framer.is_full()
            });
            match drained {
                Poll::Ready(true) if failed => {
                    this.done = true;
                    this.rx.close();
                    break;
                }
                Poll::Ready(true) => {}
                Poll::Ready(false) => {
                    // The run ended and its terminal event is in the buffer.
                    this.guard.armed = false;
                    this.done = true;
                    break;
                }
                Poll::Pending => break,
            }
            if this.run.is_none() {
                break;
            }
        }
        if let Some(chunk) = this.framer.take() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        let keep_alive = this.framer.poll_keep_alive(cx).map(|chunk| Some(Ok(chunk)));
        if keep_alive.is_pending() {
            // Nothing to send and the run is waiting: the stream is idle.
            this.rx.release_if_empty();
        }
        keep_alive
    }
}

/// A response body of `(seq, event)` pairs (the event owned, or shared as
/// `Arc<Event>` by a fan-out) from any source — a log replay
/// followed by a live subscription, a channel, a broadcast hub — each sent as
/// soon as it arrives: SSE frames carry `id: <seq>` (so a client can resume
/// with `Last-Event-ID`), protobuf frames carry the event alone.
///
/// It behaves as an [`AgentEndpoint`](crate::AgentEndpoint)'s body does:
/// events ready together leave as one chunk, an idle SSE stream gets a
/// `: keep-alive` comment every period (15 s by default) without events, and
/// an event that cannot be encoded in the negotiated format (an unknown
/// event as protobuf) ends the stream with a `RUN_ERROR` of code
/// `encoding_error`. The stream ends when the source does.
///
/// The source is polled on the connection's own task, so an idle stream costs
/// no task, and no memory beyond the source's and a timer: the encoding
/// buffer exists only while a chunk is being built.
///
/// ```
/// use agwire_server::EventStream;
/// use agwire_server::core::{Event, StepStartedEvent};
/// use agwire_codec::negotiate::WireFormat;
///
/// let step = Event::StepStarted(StepStartedEvent::new("plan"));
/// let events = futures_util::stream::iter([(7, step)]);
/// let response = EventStream::new(events, WireFormat::Sse).into_response();
/// assert_eq!(response.headers()["content-type"], "text/event-stream");
/// assert_eq!(response.headers()["cache-control"], "no-store");
/// ```
pub struct EventStream<S> {
    source: S,
    framer: Framer,
    done: bool,
}

impl<S> std::fmt::Debug for EventStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("framer", &self.framer)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<S, E> EventStream<S>
where
    S: Stream<Item = (u64, E)> + Send + Unpin + 'static,
    E: std::borrow::Borrow<Event>,
{
    /// The events of `source`, in `format` (from
    /// [`Negotiator::choose`](agwire_codec::negotiate::Negotiator::choose) or
    /// [`Intake`](crate::Intake)), with keep-alive comments every 15 s.
    pub fn new(source: S, format: WireFormat) -> Self {
        Self::with_keep_alive(source, format, Some(DEFAULT_KEEP_ALIVE))
    }

    /// Like [`EventStream::new`], with a keep-alive comment after `period`
    /// without events (`None`: never).
    pub fn with_keep_alive(source: S, format: WireFormat, period: Option<Duration>) -> Self {
        Self {
            source,
            framer: Framer::new(format, period),
            done: false,
        }
    }

    /// The `200` response streaming it, with the event-stream headers
    /// (content type, `Cache-Control: no-store`, `X-Accel-Buffering: no`).
    pub fn into_response(self) -> Response {
        let format = self.framer.format;
        stream_response(Body::from_stream(self), format)
    }
}

impl EventStream<Receiver> {
    /// The events of a channel, until every sender is gone.
    pub fn from_receiver(
        receiver: tokio::sync::mpsc::Receiver<(u64, Event)>,
        format: WireFormat,
    ) -> Self {
        Self::new(Receiver(receiver), format)
    }
}

/// A channel's receiving end as a stream, for [`EventStream::from_receiver`].
#[derive(Debug)]
pub struct Receiver(tokio::sync::mpsc::Receiver<(u64, Event)>);

impl Stream for Receiver {
    type Item = (u64, Event);

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().0.poll_recv(cx)
    }
}

impl<S, E> Stream for EventStream<S>
where
    S: Stream<Item = (u64, E)> + Unpin,
    E: std::borrow::Borrow<Event>,
{
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        while !this.done && !this.framer.is_full() {
            match Pin::new(&mut this.source).poll_next(cx) {
                Poll::Ready(Some((seq, event))) => {
                    if !this.framer.push(Some(seq), event.borrow()) {
                        this.done = true;
                    }
                }
                Poll::Ready(None) => this.done = true,
                Poll::Pending => break,
            }
        }
        if let Some(chunk) = this.framer.take() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        this.framer.poll_keep_alive(cx).map(|chunk| Some(Ok(chunk)))
    }
}
