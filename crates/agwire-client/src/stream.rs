//! [`RunStream`]: one response's events, decoded, verified, folded, resumable.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agwire_codec::negotiate::WireFormat;
use agwire_codec::proto::FrameDecoder;
use agwire_codec::sse::{SseDecoder, SseFrame, decode_frame};
use agwire_core::apply::Session;
use agwire_core::pipeline::Pipeline;
use agwire_core::{DecodeMode, Event, Message, RunAgentInput, RunErrorEvent, Warning};
use bytes::Bytes;
use reqwest::header;
use reqwest::{Method, Response, Url};
use serde_json::Value;
use tokio::sync::Notify;

use crate::client::{Client, Reconnect};
use crate::error::Error;

/// Cancels a run from anywhere: the connection is closed, and the stream ends
/// with a `RUN_ERROR` whose code is `abort`, as the official client's does.
#[derive(Debug, Clone, Default)]
pub struct AbortHandle {
    inner: Arc<AbortInner>,
}

#[derive(Debug, Default)]
struct AbortInner {
    aborted: AtomicBool,
    notify: Notify,
}

impl AbortHandle {
    /// Aborts the run.
    pub fn abort(&self) {
        self.inner.aborted.store(true, Ordering::SeqCst);
        // `notify_one` keeps a permit if nobody waits yet, so an abort between
        // the flag check and the wait is not lost.
        self.inner.notify.notify_one();
    }

    /// Whether [`AbortHandle::abort`] was called.
    pub fn is_aborted(&self) -> bool {
        self.inner.aborted.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
enum Decoder {
    Sse(SseDecoder),
    Proto(FrameDecoder),
}

/// The events of one run's response, in order.
///
/// With verification (the default) every event has passed the official
/// client's pipeline — compatibility translation, chunk expansion,
/// verification — and [`RunStream::session`] holds what they folded into.
#[derive(Debug)]
pub struct RunStream {
    client: Client,
    input: RunAgentInput,
    body: Bytes,
    location: Option<Url>,
    response: Option<Response>,
    decoder: Decoder,
    pipeline: Option<Pipeline>,
    /// Folded session when verification is off (nothing folded).
    plain: Session,
    /// Events to deliver, each with whether it changed (messages, state).
    ready: VecDeque<(Event, (bool, bool))>,
    changes: (bool, bool),
    frames: Vec<SseFrame>,
    decoded: Vec<Event>,
    warnings: Vec<Warning>,
    last_id: Option<String>,
    terminal: bool,
    done: bool,
    attempts: u32,
    abort: AbortHandle,
}

impl Client {
    /// Starts a run: posts `input` and returns its event stream once the
    /// response headers arrived. A non-2xx answer is [`Error::Status`].
    pub async fn run(&self, input: &RunAgentInput) -> Result<RunStream, Error> {
        self.start(input, None).await
    }

    /// [`Client::run`], folding from `seed` (messages and state) instead of
    /// the input's own: an [`HttpAgent`](crate::HttpAgent) folds into all of
    /// its messages, the activity messages it does not send included.
    pub(crate) async fn start(
        &self,
        input: &RunAgentInput,
        seed: Option<(Vec<Message>, Value)>,
    ) -> Result<RunStream, Error> {
        let body = Bytes::from(
            serde_json::to_vec(input).map_err(|e| Error::Config(format!("input: {e}")))?,
        );
        let response = self
            .send(Method::POST, self.url().clone(), Some(body.clone()), None)
            .await?;
        Ok(RunStream::new(
            self.clone(),
            input.clone(),
            body,
            response,
            seed,
        ))
    }
}

impl RunStream {
    fn new(
        client: Client,
        input: RunAgentInput,
        body: Bytes,
        response: Response,
        seed: Option<(Vec<Message>, Value)>,
    ) -> Self {
        let location = response
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|l| response.url().join(l).ok());
        let decoder = decoder_for(&response);
        let pipeline = client.verify.then(|| match seed {
            Some((messages, state)) => Pipeline::new(input.thread_id.clone(), messages, state),
            None => Pipeline::for_input(&input),
        });
        Self {
            client,
            input,
            body,
            location,
            response: Some(response),
            decoder,
            pipeline,
            plain: Session::default(),
            ready: VecDeque::new(),
            changes: (false, false),
            frames: Vec::new(),
            decoded: Vec::new(),
            warnings: Vec::new(),
            last_id: None,
            terminal: false,
            done: false,
            attempts: 0,
            abort: AbortHandle::default(),
        }
    }

    /// A handle that aborts this run.
    pub fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    /// The input this run was started with.
    pub fn input(&self) -> &RunAgentInput {
        &self.input
    }

    /// What the delivered events folded into (empty without verification).
    pub fn session(&self) -> &Session {
        match &self.pipeline {
            Some(p) => p.session(),
            None => &self.plain,
        }
    }

    /// Takes the folded session.
    pub fn into_session(self) -> Session {
        match self.pipeline {
            Some(p) => p.into_session(),
            None => self.plain,
        }
    }

    /// Warnings since the last call: members stripped while decoding, and the
    /// pipeline's (each was also traced).
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        if let Some(p) = &mut self.pipeline {
            self.warnings.extend(p.take_warnings());
        }
        std::mem::take(&mut self.warnings)
    }

    /// The SSE id of the last delivered event, if the server sent ids.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// Whether the last event changed the messages and the state.
    pub(crate) fn last_changes(&self) -> (bool, bool) {
        self.changes
    }

    /// The events as a [`futures_core::Stream`], for combinators and
    /// `select!`; the session is then out of reach, so fold with
    /// [`crate::Client::run_to_completion`] when it is needed.
    pub fn into_stream(self) -> impl futures_core::Stream<Item = Result<Event, Error>> + Send {
        futures_util::stream::unfold(self, |mut run| async move {
            run.next().await.map(|item| (item, run))
        })
    }

    /// The next event; `None` after the run's end (or an error).
    pub async fn next(&mut self) -> Option<Result<Event, Error>> {
        loop {
            if let Some((event, changes)) = self.ready.pop_front() {
                self.changes = changes;
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            if self.abort.is_aborted() {
                return Some(self.aborted());
            }
            let read = {
                let Some(response) = self.response.as_mut() else {
                    self.done = true;
                    return None;
                };
                let idle = self.client.idle_timeout;
                let abort = self.abort.inner.clone();
                tokio::select! {
                    biased;
                    () = abort.notify.notified() => None,
                    chunk = read_chunk(response, idle) => Some(chunk),
                }
            };
            let Some(read) = read else {
                return Some(self.aborted());
            };
            let step = match read {
                Ok(Some(bytes)) => self.decode(&bytes),
                Ok(None) => self.end_of_body().await,
                Err(error) => self.broken(error).await,
            };
            if let Err(error) = step {
                self.done = true;
                self.response = None;
                return Some(Err(error));
            }
        }
    }

    fn aborted(&mut self) -> Result<Event, Error> {
        self.done = true;
        self.response = None;
        let event = Event::RunError(RunErrorEvent::new("Request aborted").code("abort"));
        if let Some(p) = &mut self.pipeline {
            // RUN_ERROR is accepted anywhere before the terminal event; record it.
            let _ = p.push(event.clone());
        }
        self.changes = (false, false);
        Ok(event)
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<(), Error> {
        match &mut self.decoder {
            Decoder::Sse(d) => {
                d.push(bytes, &mut self.frames)?;
                self.take_frames()
            }
            Decoder::Proto(d) => {
                d.push(bytes, &mut self.decoded)?;
                self.take_decoded()
            }
        }
    }

    fn take_frames(&mut self) -> Result<(), Error> {
        let frames = std::mem::take(&mut self.frames);
        for frame in &frames {
            if let Some(id) = &frame.id {
                if self.already_seen(id) {
                    continue;
                }
                self.last_id = Some(id.clone());
                self.attempts = 0;
            }
            let decoded = decode_frame(frame, DecodeMode::Lenient)?;
            self.warnings.extend(decoded.warnings);
            self.accept(decoded.value)?;
        }
        self.frames = frames;
        self.frames.clear();
        Ok(())
    }

    fn take_decoded(&mut self) -> Result<(), Error> {
        let decoded = std::mem::take(&mut self.decoded);
        for event in decoded {
            self.accept(event)?;
        }
        Ok(())
    }

    /// A resumed stream may repeat events; ids at or below the last one
    /// delivered are dropped (numerically when both are numbers).
    fn already_seen(&self, id: &str) -> bool {
        let Some(last) = &self.last_id else {
            return false;
        };
        match (id.parse::<u64>(), last.parse::<u64>()) {
            (Ok(id), Ok(last)) => id <= last,
            _ => id == last,
        }
    }

    fn accept(&mut self, event: Event) -> Result<(), Error> {
        match &event {
            Event::RunStarted(_) => self.terminal = false,
            Event::RunFinished(_) | Event::RunError(_) => self.terminal = true,
            _ => {}
        }
        match &mut self.pipeline {
            Some(p) => {
                let delivered = p.push(event)?.to_vec();
                let changes = p.last_changes();
                let n = delivered.len();
                // One push may deliver several events (chunk expansion); its
                // changes are reported with the last of them.
                self.ready.extend(
                    delivered
                        .into_iter()
                        .enumerate()
                        .map(|(i, e)| (e, if i + 1 == n { changes } else { (false, false) })),
                );
            }
            None => self.ready.push_back((event, (false, false))),
        }
        Ok(())
    }

    async fn end_of_body(&mut self) -> Result<(), Error> {
        match &mut self.decoder {
            Decoder::Sse(d) => {
                d.finish(&mut self.frames)?;
                self.take_frames()?;
            }
            Decoder::Proto(d) => d.finish()?,
        }
        if self.terminal {
            self.done = true;
            self.response = None;
            return Ok(());
        }
        self.broken(Error::Truncated).await
    }

    /// The body broke off (or ended early): resume if the stream can be,
    /// else fail with `error`.
    async fn broken(&mut self, error: Error) -> Result<(), Error> {
        let resumable = matches!(self.decoder, Decoder::Sse(_))
            && self.last_id.is_some()
            && self.client.reconnect.max_attempts > 0;
        if !resumable {
            return Err(error);
        }
        self.response = None;
        let mut last = error;
        loop {
            if self.attempts >= self.client.reconnect.max_attempts {
                return Err(Error::ReconnectFailed {
                    attempts: self.attempts,
                    last: Box::new(last),
                });
            }
            let backoff = backoff(&self.client.reconnect, self.attempts);
            self.attempts += 1;
            tracing::debug!(attempt = self.attempts, ?backoff, last_id = ?self.last_id, "reconnecting");
            tokio::select! {
                biased;
                () = self.abort.inner.notify.notified() => {
                    // Re-arm for `next`, which turns the abort into RUN_ERROR.
                    self.abort.inner.notify.notify_one();
                    return Ok(());
                }
                () = tokio::time::sleep(backoff) => {}
            }
            let (method, url, body) = match &self.location {
                Some(url) => (Method::GET, url.clone(), None),
                None => (
                    Method::POST,
                    self.client.url().clone(),
                    Some(self.body.clone()),
                ),
            };
            match self
                .client
                .send(method, url, body, self.last_id.as_deref())
                .await
            {
                Ok(response) => {
                    self.decoder = decoder_for(&response);
                    self.response = Some(response);
                    return Ok(());
                }
                Err(error) => last = error,
            }
        }
    }
}

fn decoder_for(response: &Response) -> Decoder {
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    match WireFormat::of_response(content_type) {
        WireFormat::Protobuf => Decoder::Proto(FrameDecoder::new()),
        _ => Decoder::Sse(SseDecoder::new()),
    }
}

async fn read_chunk(
    response: &mut Response,
    idle: Option<Duration>,
) -> Result<Option<Bytes>, Error> {
    match idle {
        Some(limit) => match tokio::time::timeout(limit, response.chunk()).await {
            Ok(chunk) => Ok(chunk?),
            Err(_) => Err(Error::Idle(limit)),
        },
        None => Ok(response.chunk().await?),
    }
}

fn backoff(policy: &Reconnect, attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX);
    policy
        .initial_backoff
        .saturating_mul(factor)
        .min(policy.max_backoff)
}
