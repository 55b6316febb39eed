//! The response body: events from the run's channel, encoded as they arrive.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use agwire_codec::negotiate::WireFormat;
use agwire_codec::sse::SseEncoder;
use agwire_core::{BaseEvent, Event, RunErrorEvent};
use bytes::Bytes;
use futures_core::Stream;
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::agent::BoxFuture;
use crate::context::DisconnectPolicy;

/// Events ready together are written as one chunk up to about this size: one
/// write per burst instead of one per event, without holding back a stream.
const BATCH_BYTES: usize = 32 * 1024;

/// Fires the run's cancellation when the body is dropped before the run's
/// channel closed, i.e. when the client went away mid-run.
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

/// A stream of encoded chunks for `Body::from_stream`.
///
/// It also drives the run: the agent's future is polled here, on the
/// connection's task, so a short run needs no task of its own and no wake-up
/// across threads, and events the agent emits in one go leave in one write.
/// The channel still bounds what the agent may emit ahead of the client.
pub(crate) struct EventBody {
    run: Option<BoxFuture<'static, ()>>,
    rx: mpsc::Receiver<Event>,
    format: WireFormat,
    sse: SseEncoder,
    buf: Vec<u8>,
    keep_alive: Option<Interval>,
    /// Next SSE `id:` when ids are written.
    next_id: Option<u64>,
    guard: CancelOnDrop,
    done: bool,
}

impl std::fmt::Debug for EventBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBody")
            .field("running", &self.run.is_some())
            .field("format", &self.format)
            .field("buffered", &self.buf.len())
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
        rx: mpsc::Receiver<Event>,
        format: WireFormat,
        keep_alive: Option<Duration>,
        sse_ids: bool,
        token: CancellationToken,
        policy: DisconnectPolicy,
    ) -> Self {
        // Protobuf has no comment frame, so no keep-alive there.
        let keep_alive = keep_alive
            .filter(|_| format == WireFormat::Sse)
            .map(|period| {
                let mut interval = tokio::time::interval_at(Instant::now() + period, period);
                interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
                interval
            });
        Self {
            run: Some(run),
            rx,
            format,
            sse: SseEncoder::new(),
            buf: Vec::new(),
            keep_alive,
            next_id: sse_ids.then_some(1),
            guard: CancelOnDrop {
                token,
                policy,
                armed: true,
            },
            done: false,
        }
    }

    /// Encodes one event; false when it cannot be encoded (the stream then
    /// ends with a `RUN_ERROR` saying so).
    fn encode(&mut self, event: &Event) -> bool {
        match self.format {
            WireFormat::Sse => {
                match &mut self.next_id {
                    Some(id) => {
                        self.sse.encode_with_id(*id, event, &mut self.buf);
                        *id += 1;
                    }
                    None => self.sse.encode(event, &mut self.buf),
                }
                true
            }
            WireFormat::Protobuf => encode_proto(event, &mut self.buf),
        }
    }
}

#[cfg(feature = "proto")]
fn encode_proto(event: &Event, buf: &mut Vec<u8>) -> bool {
    match agwire_codec::proto::encode_frame(event, buf) {
        Ok(()) => true,
        Err(err) => {
            tracing::error!(%err, "event cannot be sent as protobuf; ending the run");
            let error = Event::RunError(RunErrorEvent {
                message: format!("event cannot be encoded as protobuf: {err}"),
                code: Some("encoding_error".into()),
                usage: None,
                base: BaseEvent::default(),
            });
            let _ = agwire_codec::proto::encode_frame(&error, buf);
            false
        }
    }
}

#[cfg(not(feature = "proto"))]
fn encode_proto(_: &Event, _: &mut Vec<u8>) -> bool {
    unreachable!("protobuf is never negotiated without the proto feature")
}

impl Stream for EventBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        while this.buf.len() < BATCH_BYTES {
            // Let the agent run until it waits (for I/O, or for room in the
            // channel), then take what it emitted; repeat while that frees room.
            if let Some(run) = &mut this.run
                && run.as_mut().poll(cx).is_ready()
            {
                this.run = None;
            }
            let before = this.buf.len();
            let mut closed = false;
            loop {
                match this.rx.poll_recv(cx) {
                    Poll::Ready(Some(event)) => {
                        if !this.encode(&event) {
                            this.done = true;
                            this.rx.close();
                            closed = true;
                            break;
                        }
                        if this.buf.len() >= BATCH_BYTES {
                            break;
                        }
                    }
                    Poll::Ready(None) => {
                        // The run ended and its terminal event is in the buffer.
                        this.guard.armed = false;
                        this.done = true;
                        closed = true;
                        break;
                    }
                    Poll::Pending => break,
                }
            }
            if closed || this.buf.len() == before || this.run.is_none() {
                break;
            }
        }
        if !this.buf.is_empty() {
            if let Some(interval) = &mut this.keep_alive {
                interval.reset();
            }
            let chunk = Bytes::from(std::mem::take(&mut this.buf));
            return Poll::Ready(Some(Ok(chunk)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(interval) = &mut this.keep_alive
            && interval.poll_tick(cx).is_ready()
        {
            this.sse.keep_alive(&mut this.buf);
            let chunk = Bytes::from(std::mem::take(&mut this.buf));
            return Poll::Ready(Some(Ok(chunk)));
        }
        Poll::Pending
    }
}
