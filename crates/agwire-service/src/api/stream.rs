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
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures_core::Stream;

use super::{ApiError, ApiResult};
use crate::engine::{Accepted, FromStart};
use crate::metrics::{Metrics, StreamGuard};
use crate::service::Service;

/// What a path segment must escape: everything but RFC 3986's unreserved
/// characters and the sub-delimiters a segment may hold as they are.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// Where a run's log is read, and resumed: its events URL.
pub(crate) fn events_location(run_id: &str) -> String {
    format!(
        "/api/v1/agent/runs/{}/events",
        percent_encoding::utf8_percent_encode(run_id, PATH_SEGMENT)
    )
}

/// The event number a reader resumes after: `Last-Event-ID`, else the
/// `after` query value, else 0 (the whole log).
pub(crate) fn resume_after(headers: &HeaderMap, after: Option<&str>) -> ApiResult<u64> {
    let resume = match headers.get("last-event-id").map(|v| v.to_str()) {
        Some(Ok(id)) => Some(id),
        // Bytes that are not text are not a sequence number either.
        Some(Err(_)) => Some("\u{fffd}"),
        None => after,
    };
    match resume.map(str::parse::<u64>) {
        None => Ok(0),
        Some(Ok(after)) => Ok(after),
        Some(Err(_)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "Last-Event-ID / after must be an event sequence number",
        )),
    }
}

/// The stream answering a POST that accepted a run, with `Location` naming
/// where it is resumed. A re-post of the same request is a reconnect: with
/// `Last-Event-ID` it gets only the events after that one (exactly the rest,
/// as at the `Location`); a new run streams from its start.
pub(crate) fn accepted_stream(
    service: &Service,
    (accepted, from_start): (Accepted, Option<FromStart>),
    headers: &HeaderMap,
    format: WireFormat,
) -> ApiResult {
    let mut response = match from_start {
        Some(from_start) => respond(
            service,
            service
                .engine
                .follow_from_start(accepted.task_id, from_start),
            format,
            tracing::Span::none(),
        ),
        None => {
            let after = if accepted.replayed {
                resume_after(headers, None)?
            } else {
                0
            };
            stream(service, accepted.task_id, after, format)
        }
    };
    if let Ok(value) = HeaderValue::from_str(&events_location(&accepted.run_id)) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// The run's events after `after`, then live ones, until its terminal event.
pub(crate) fn stream(
    service: &Service,
    task_id: String,
    after: u64,
    format: WireFormat,
) -> Response {
    let events = service.engine.follow(task_id, after);
    respond(service, events, format, tracing::Span::none())
}

/// [`stream`] for a reader of `run`'s log, its time in the run's trace
/// (when traces are exported).
pub(crate) fn traced_stream(
    service: &Service,
    run: &crate::engine::RunRecord,
    after: u64,
    format: WireFormat,
) -> Response {
    let span = service.engine.telemetry.stream_span(run, after);
    let events = service.engine.follow(run.task_id.clone(), after);
    respond(service, events, format, span)
}

fn respond(
    service: &Service,
    events: impl Stream<Item = (u64, Arc<Event>)> + Send + 'static,
    format: WireFormat,
    span: tracing::Span,
) -> Response {
    let followed = Followed {
        events: Box::pin(events),
        _open: Metrics::stream_opened(&service.engine.metrics),
        _span: span,
    };
    EventStream::new(followed, format).into_response()
}

/// A follower's events, counted as an open stream while the response lives
/// (and, exported, timed by its span).
struct Followed {
    events: Pin<Box<dyn Stream<Item = (u64, Arc<Event>)> + Send>>,
    _open: StreamGuard,
    _span: tracing::Span,
}

impl Stream for Followed {
    type Item = (u64, Arc<Event>);

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().events.as_mut().poll_next(cx)
    }
}
