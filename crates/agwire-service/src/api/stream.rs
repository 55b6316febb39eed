//! A run's log as a streaming response: SSE frames carry the event's number
//! as `id:` (what `Last-Event-ID` resumes after); protobuf frames when the
//! client asked for them.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agwire_codec::negotiate::WireFormat;
use agwire_codec::sse::SseEncoder;
use agwire_core::Event;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_core::Stream;
use tokio::sync::mpsc;

use crate::metrics::Metrics;
use crate::service::Service;

/// Keep-alive comment period on idle SSE streams.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The run's events after `after`, then live ones, until its terminal event.
pub(crate) fn stream(
    service: &Service,
    task_id: String,
    after: u64,
    format: WireFormat,
) -> Response {
    let rx = service.engine.follow(task_id, after);
    let body = LogBody::new(rx, format, Metrics::stream_opened(&service.engine.metrics));
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Encodes `(seq, event)` pairs: SSE frames carry `id: <seq>`.
struct LogBody {
    rx: mpsc::Receiver<(u64, Arc<Event>)>,
    format: WireFormat,
    sse: SseEncoder,
    buf: Vec<u8>,
    keep_alive: tokio::time::Interval,
    _open: crate::metrics::StreamGuard,
}

impl LogBody {
    fn new(
        rx: mpsc::Receiver<(u64, Arc<Event>)>,
        format: WireFormat,
        open: crate::metrics::StreamGuard,
    ) -> Self {
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            rx,
            format,
            sse: SseEncoder::new(),
            buf: Vec::new(),
            keep_alive,
            _open: open,
        }
    }
}

impl Stream for LogBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let mut ended = false;
        while this.buf.len() < 32 * 1024 {
            match this.rx.poll_recv(cx) {
                Poll::Ready(Some((seq, event))) => match this.format {
                    WireFormat::Sse => this.sse.encode_with_id(seq, &event, &mut this.buf),
                    _ => {
                        if let Err(error) = agwire_codec::proto::encode_frame(&event, &mut this.buf)
                        {
                            tracing::error!(%error, "event cannot be sent as protobuf");
                        }
                    }
                },
                Poll::Ready(None) => {
                    ended = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        if !this.buf.is_empty() {
            this.keep_alive.reset();
            return Poll::Ready(Some(Ok(Bytes::from(std::mem::take(&mut this.buf)))));
        }
        if ended {
            return Poll::Ready(None);
        }
        if this.format == WireFormat::Sse && this.keep_alive.poll_tick(cx).is_ready() {
            this.sse.keep_alive(&mut this.buf);
            return Poll::Ready(Some(Ok(Bytes::from(std::mem::take(&mut this.buf)))));
        }
        Poll::Pending
    }
}
