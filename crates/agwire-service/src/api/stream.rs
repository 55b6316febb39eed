//! A run's log as a streaming response, through agwire-server's
//! [`EventStream`]: SSE frames carry the event's number as `id:` (what
//! `Last-Event-ID` resumes after); protobuf frames when the client asked for
//! them; keep-alive comments on idle SSE streams; an event the format cannot
//! carry ends the stream with `RUN_ERROR` `encoding_error`, as on every
//! agwire endpoint.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use agwire_codec::negotiate::WireFormat;
use agwire_core::Event;
use agwire_server::EventStream;
use axum::response::Response;
use futures_core::Stream;

use crate::metrics::{Metrics, StreamGuard};
use crate::service::Service;

/// The run's events after `after`, then live ones, until its terminal event.
pub(crate) fn stream(
    service: &Service,
    task_id: String,
    after: u64,
    format: WireFormat,
) -> Response {
    let followed = Followed {
        events: Box::pin(service.engine.follow(task_id, after)),
        _open: Metrics::stream_opened(&service.engine.metrics),
    };
    EventStream::new(followed, format).into_response()
}

/// A follower's events, counted as an open stream while the response lives.
struct Followed {
    events: Pin<Box<dyn Stream<Item = (u64, Arc<Event>)> + Send>>,
    _open: StreamGuard,
}

impl Stream for Followed {
    type Item = (u64, Arc<Event>);

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().events.as_mut().poll_next(cx)
    }
}
