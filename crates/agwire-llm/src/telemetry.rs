//! Model calls as OpenTelemetry GenAI spans, through `tracing`.
//!
//! [`Traced`] wraps any [`ChatModel`]: each call is a `tracing` span named
//! as the [GenAI semantic conventions] name an inference span (`chat
//! {model}`), with their attributes as fields: `gen_ai.operation.name`,
//! `gen_ai.provider.name`, `gen_ai.request.model`, the request's
//! temperature and token limit, `server.address`/`server.port`,
//! `gen_ai.usage.input_tokens`/`output_tokens`,
//! `gen_ai.response.time_to_first_chunk` (seconds) and `error.type`. The
//! span lasts from the request to the end of the answer (retries
//! included), so its duration is the call's. [`crate::agui::ToolLoop`]
//! adds an `execute_tool {name}` span per backend tool call.
//!
//! The fields follow `tracing-opentelemetry`'s conventions (`otel.name`,
//! `otel.kind`, `otel.status_code`; integers as `i64`: it exports a `u64`
//! field as text): with its layer installed they are
//! OpenTelemetry spans; without it they are ordinary `tracing` spans, and
//! with no subscriber interested they cost nothing.
//!
//! Feature `opentelemetry` skips the spans of a trace the sampler dropped
//! (a span costs microseconds to build even unrecorded), and adds what
//! `tracing` fields cannot carry: the
//! finish reasons as a list, `traceparent` on OpenAI-compatible requests
//! (the global propagator's headers), prompts and completions as the
//! `gen_ai.client.inference.operation.details` event when captured
//! ([`set_capture_content`]), and the GenAI client metrics
//! (`gen_ai.client.operation.duration`, `gen_ai.client.token.usage`,
//! `gen_ai.client.operation.time_to_first_chunk`) on the global meter.
//!
//! [GenAI semantic conventions]: https://opentelemetry.io/docs/specs/semconv/gen-ai/

use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use futures_core::Stream;
use tracing::Instrument;
use tracing::field::Empty;

use crate::chat::{
    BoxFuture, ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatStream, FinishReason, ModelInfo,
    UserPart,
};
use crate::error::Error;

/// Whether prompts and completions are recorded: unset (read from the
/// environment at first use), off, on.
static CAPTURE: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// Records prompts, completions and tool arguments and results on the
/// spans (feature `opentelemetry`), or stops. Off unless set, or unless
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (the variable
/// OpenTelemetry's GenAI instrumentations read): they may hold anything
/// your users typed.
pub fn set_capture_content(on: bool) {
    CAPTURE.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

/// Whether prompts and completions are recorded (see
/// [`set_capture_content`]).
pub fn capture_content() -> bool {
    match CAPTURE.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => {
            let on = std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
                .is_ok_and(|v| v.eq_ignore_ascii_case("true"));
            set_capture_content(on);
            on
        }
    }
}

/// A model whose calls are GenAI spans (see the [module](self) docs).
#[derive(Debug)]
pub struct Traced<M> {
    inner: M,
    info: ModelInfo,
    stage: Option<String>,
}

impl<M: ChatModel> Traced<M> {
    /// `inner`, described by its [`ChatModel::info`].
    pub fn new(inner: M) -> Self {
        let info = inner.info();
        Self {
            inner,
            info,
            stage: None,
        }
    }

    /// Names what the calls are for (the `agwire.llm.stage` attribute:
    /// `router`, `worker`), for a model used in several roles.
    pub fn stage(mut self, stage: impl Into<String>) -> Self {
        self.stage = Some(stage.into());
        self
    }
}

impl<M: ChatModel> ChatModel for Traced<M> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatStream, Error>> {
        let model = request
            .model
            .clone()
            .unwrap_or_else(|| self.info.model.clone());
        let (address, port) = match &self.info.server {
            Some((host, port)) => (Some(host.as_str()), Some(i64::from(*port))),
            None => (None, None),
        };
        // A model in this process is not a remote call.
        let kind = if address.is_some() {
            "client"
        } else {
            "internal"
        };
        // In a trace the sampler dropped, no span: nothing would record it
        // (the metrics still count the call).
        let traced = !otel::unsampled();
        let span = if !traced {
            tracing::Span::none()
        } else {
            tracing::info_span!(
            "chat",
            otel.name = %format_args!("chat {model}"),
            otel.kind = kind,
            otel.status_code = Empty,
            otel.status_description = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = %self.info.provider,
            gen_ai.request.model = %model,
            gen_ai.request.temperature = request.temperature.map(f64::from),
            gen_ai.request.max_tokens = request.max_tokens.map(i64::from),
            server.address = address,
            server.port = port,
            agwire.llm.stage = self.stage.as_deref(),
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.response.time_to_first_chunk = Empty,
            error.type = Empty,
            )
        };
        let observed = Observed {
            span: span.clone(),
            started: Instant::now(),
            first: false,
            done: false,
            provider: self.info.provider.clone(),
            model,
            input: (traced && capture_content()).then(|| content::input(&request.messages)),
            output: content::Output::default(),
            usage: None,
        };
        let call = self.inner.stream(request).instrument(span);
        Box::pin(async move {
            let mut observed = observed;
            match call.await {
                Ok(inner) => Ok(Box::pin(TracedStream { inner, observed }) as ChatStream),
                Err(error) => {
                    observed.failed(&error);
                    Err(error)
                }
            }
        })
    }
}

/// The answer's stream, watched by its span.
struct TracedStream {
    inner: ChatStream,
    observed: Observed,
}

/// What a call's span records as its answer streams.
struct Observed {
    span: tracing::Span,
    started: Instant,
    first: bool,
    done: bool,
    provider: String,
    model: String,
    /// The prompt as the conventions' JSON, when captured.
    input: Option<String>,
    output: content::Output,
    usage: Option<crate::Usage>,
}

impl Observed {
    fn event(&mut self, event: &ChatEvent) {
        if !self.first {
            self.first = true;
            let seconds = self.started.elapsed().as_secs_f64();
            self.span
                .record("gen_ai.response.time_to_first_chunk", seconds);
            metrics::first_chunk(&self.provider, &self.model, seconds);
        }
        match event {
            ChatEvent::Usage(usage) => {
                self.span
                    .record("gen_ai.usage.input_tokens", int(usage.prompt_tokens));
                self.span
                    .record("gen_ai.usage.output_tokens", int(usage.completion_tokens));
                self.usage = Some(*usage);
            }
            ChatEvent::Finish(reason) => {
                self.output.finish = Some(finish_reason(reason));
            }
            _ => {}
        }
        if self.input.is_some() {
            self.output.add(event);
        }
    }

    fn failed(&mut self, error: &Error) {
        let kind = match error {
            Error::Http { status, .. } => status.to_string(),
            Error::Transport(_) => "transport".into(),
            Error::Busy { .. } => "busy".into(),
            _ => "_OTHER".into(),
        };
        self.span.record("error.type", kind.as_str());
        self.span.record("otel.status_code", "error");
        self.span
            .record("otel.status_description", error.to_string().as_str());
        self.end(Some(&kind));
    }

    /// The call's end: what the attributes cannot hold, and the metrics.
    fn end(&mut self, error: Option<&str>) {
        if self.done {
            return;
        }
        self.done = true;
        metrics::ended(
            &self.provider,
            &self.model,
            self.started.elapsed().as_secs_f64(),
            self.usage.as_ref(),
            error,
        );
        otel::finish(
            &self.span,
            self.output.finish.as_deref(),
            self.input.take(),
            &self.output,
        );
    }
}

impl Stream for TracedStream {
    type Item = Result<ChatEvent, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let polled = {
            let _in_call = this.observed.span.enter();
            this.inner.as_mut().poll_next(cx)
        };
        match &polled {
            Poll::Ready(Some(Ok(event))) => this.observed.event(event),
            Poll::Ready(Some(Err(error))) => this.observed.failed(error),
            Poll::Ready(None) => this.observed.end(None),
            Poll::Pending => {}
        }
        polled
    }
}

impl Drop for TracedStream {
    fn drop(&mut self) {
        // Dropped before its end: the caller cancelled the call.
        if !self.observed.done {
            self.observed.span.record("error.type", "cancelled");
            self.observed.end(Some("cancelled"));
        }
    }
}

/// A count as a span field takes it (see the [module](self) docs).
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A finish reason as the conventions spell it.
fn finish_reason(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".into(),
        FinishReason::Length => "length".into(),
        FinishReason::ToolCalls => "tool_call".into(),
        FinishReason::ContentFilter => "content_filter".into(),
        FinishReason::Other(other) => other.clone(),
    }
}

/// Prompts and completions as the conventions' JSON
/// (`gen_ai.input.messages`, `gen_ai.output.messages`).
mod content {
    use serde_json::{Value, json};

    use super::{ChatEvent, ChatMessage, UserPart};

    pub(super) fn input(messages: &[ChatMessage]) -> String {
        let messages: Vec<Value> = messages.iter().map(message).collect();
        Value::Array(messages).to_string()
    }

    fn message(message: &ChatMessage) -> Value {
        match message {
            ChatMessage::System(text) => {
                json!({"role": "system", "parts": [{"type": "text", "content": text}]})
            }
            ChatMessage::User { content } => {
                let parts: Vec<Value> = content
                    .iter()
                    .map(|part| match part {
                        UserPart::Text(text) => json!({"type": "text", "content": text}),
                        // The bytes of an inline image are not telemetry.
                        UserPart::ImageUrl(url) if url.starts_with("data:") => {
                            json!({"type": "blob", "modality": "image"})
                        }
                        UserPart::ImageUrl(url) => {
                            json!({"type": "uri", "modality": "image", "uri": url})
                        }
                    })
                    .collect();
                json!({"role": "user", "parts": parts})
            }
            ChatMessage::Assistant {
                content,
                reasoning,
                tool_calls,
            } => {
                let mut parts = Vec::new();
                if let Some(reasoning) = reasoning {
                    parts.push(json!({"type": "reasoning", "content": reasoning}));
                }
                if let Some(text) = content {
                    parts.push(json!({"type": "text", "content": text}));
                }
                for call in tool_calls {
                    parts.push(tool_call(&call.id, &call.name, &call.arguments));
                }
                json!({"role": "assistant", "parts": parts})
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => json!({"role": "tool", "parts": [
                {"type": "tool_call_response", "id": tool_call_id, "response": content}
            ]}),
        }
    }

    fn tool_call(id: &str, name: &str, arguments: &str) -> Value {
        let arguments =
            serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.into()));
        json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments})
    }

    /// The answer as it streams (only when captured).
    #[derive(Default)]
    pub(super) struct Output {
        text: String,
        reasoning: String,
        /// Id, name, arguments, by the provider's index.
        calls: Vec<(String, String, String)>,
        pub(super) finish: Option<String>,
    }

    impl Output {
        pub(super) fn add(&mut self, event: &ChatEvent) {
            match event {
                ChatEvent::TextDelta(delta) => self.text.push_str(delta),
                ChatEvent::ReasoningDelta(delta) => self.reasoning.push_str(delta),
                ChatEvent::ToolCallStart { index, id, name } => {
                    if self.calls.len() <= *index {
                        self.calls.resize(*index + 1, Default::default());
                    }
                    self.calls[*index] = (id.clone(), name.clone(), String::new());
                }
                ChatEvent::ToolCallArgs { index, delta } => {
                    if let Some(call) = self.calls.get_mut(*index) {
                        call.2.push_str(delta);
                    }
                }
                _ => {}
            }
        }

        #[cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
        pub(super) fn to_json(&self) -> String {
            let mut parts = Vec::new();
            if !self.reasoning.is_empty() {
                parts.push(json!({"type": "reasoning", "content": self.reasoning}));
            }
            if !self.text.is_empty() {
                parts.push(json!({"type": "text", "content": self.text}));
            }
            for (id, name, arguments) in &self.calls {
                parts.push(tool_call(id, name, arguments));
            }
            json!([{"role": "assistant", "parts": parts,
                    "finish_reason": self.finish.as_deref().unwrap_or("")}])
            .to_string()
        }
    }
}

/// What only the OpenTelemetry API can record.
#[cfg(feature = "opentelemetry")]
mod otel {
    use opentelemetry::{Array, KeyValue, StringValue, Value};
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    pub(super) fn finish(
        span: &tracing::Span,
        finish: Option<&str>,
        input: Option<String>,
        output: &super::content::Output,
    ) {
        if let Some(finish) = finish {
            let reasons = Array::String(vec![StringValue::from(finish.to_owned())]);
            span.set_attribute("gen_ai.response.finish_reasons", Value::Array(reasons));
        }
        if let Some(input) = input {
            span.add_event(
                "gen_ai.client.inference.operation.details",
                vec![
                    KeyValue::new("gen_ai.input.messages", input),
                    KeyValue::new("gen_ai.output.messages", output.to_json()),
                ],
            );
        }
    }

    /// Whether the current span is in a trace the sampler dropped.
    pub(super) fn unsampled() -> bool {
        use opentelemetry::trace::TraceContextExt as _;
        let context = tracing::Span::current().context();
        let span = context.span();
        let span = span.span_context();
        span.is_valid() && !span.is_sampled()
    }

    /// The global propagator's headers for the current span's context.
    pub(super) fn headers() -> Vec<(String, String)> {
        struct Headers(Vec<(String, String)>);
        impl opentelemetry::propagation::Injector for Headers {
            fn set(&mut self, key: &str, value: String) {
                self.0.push((key.to_owned(), value));
            }
        }
        let context = tracing::Span::current().context();
        let mut headers = Headers(Vec::new());
        opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.inject_context(&context, &mut headers);
        });
        headers.0
    }
}

#[cfg(not(feature = "opentelemetry"))]
mod otel {
    pub(super) fn finish(
        _: &tracing::Span,
        _: Option<&str>,
        _: Option<String>,
        _: &super::content::Output,
    ) {
    }

    pub(super) fn headers() -> Vec<(String, String)> {
        Vec::new()
    }

    pub(super) fn unsampled() -> bool {
        false
    }
}

/// The headers that carry the current span's trace to a provider (W3C
/// `traceparent`, `tracestate`): the global propagator's, with feature
/// `opentelemetry`; none without it.
pub fn trace_headers() -> Vec<(String, String)> {
    otel::headers()
}

/// The GenAI client metrics, on the global meter provider.
#[cfg(feature = "opentelemetry")]
mod metrics {
    use opentelemetry::KeyValue;
    use opentelemetry::metrics::Histogram;

    use super::OnceLock;

    struct Instruments {
        duration: Histogram<f64>,
        tokens: Histogram<u64>,
        first_chunk: Histogram<f64>,
    }

    /// Made at the first call (after the application installed its meter
    /// provider).
    fn instruments() -> &'static Instruments {
        static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
        INSTRUMENTS.get_or_init(|| {
            let meter = opentelemetry::global::meter("agwire_llm");
            // The boundaries the conventions advise.
            let seconds = vec![
                0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96,
                81.92,
            ];
            Instruments {
                duration: meter
                    .f64_histogram("gen_ai.client.operation.duration")
                    .with_unit("s")
                    .with_description("GenAI operation duration.")
                    .with_boundaries(seconds.clone())
                    .build(),
                tokens: meter
                    .u64_histogram("gen_ai.client.token.usage")
                    .with_unit("{token}")
                    .with_description("Number of input and output tokens used.")
                    .with_boundaries(vec![
                        1.0,
                        4.0,
                        16.0,
                        64.0,
                        256.0,
                        1024.0,
                        4096.0,
                        16384.0,
                        65536.0,
                        262_144.0,
                        1_048_576.0,
                        4_194_304.0,
                        16_777_216.0,
                        67_108_864.0,
                    ])
                    .build(),
                first_chunk: meter
                    .f64_histogram("gen_ai.client.operation.time_to_first_chunk")
                    .with_unit("s")
                    .with_description("Time to receive the first chunk of a streamed answer.")
                    .with_boundaries(seconds)
                    .build(),
            }
        })
    }

    fn attributes(provider: &str, model: &str) -> Vec<KeyValue> {
        vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider.to_owned()),
            KeyValue::new("gen_ai.request.model", model.to_owned()),
        ]
    }

    pub(super) fn first_chunk(provider: &str, model: &str, seconds: f64) {
        instruments()
            .first_chunk
            .record(seconds, &attributes(provider, model));
    }

    pub(super) fn ended(
        provider: &str,
        model: &str,
        seconds: f64,
        usage: Option<&crate::Usage>,
        error: Option<&str>,
    ) {
        let instruments = instruments();
        let mut attributes = attributes(provider, model);
        if let Some(usage) = usage {
            for (kind, count) in [
                ("input", usage.prompt_tokens),
                ("output", usage.completion_tokens),
            ] {
                attributes.push(KeyValue::new("gen_ai.token.type", kind));
                instruments.tokens.record(count, &attributes);
                attributes.pop();
            }
        }
        if let Some(error) = error {
            attributes.push(KeyValue::new("error.type", error.to_owned()));
        }
        instruments.duration.record(seconds, &attributes);
    }
}

#[cfg(not(feature = "opentelemetry"))]
mod metrics {
    pub(super) fn first_chunk(_: &str, _: &str, _: f64) {}

    pub(super) fn ended(_: &str, _: &str, _: f64, _: Option<&crate::Usage>, _: Option<&str>) {}
}

/// A backend tool call's span (`execute_tool {name}`), for
/// [`crate::agui::ToolLoop`].
#[cfg(feature = "agui")]
pub(crate) fn tool_span(call: &crate::ToolCall) -> tracing::Span {
    if otel::unsampled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        error.type = Empty,
    );
    #[cfg(feature = "opentelemetry")]
    if capture_content() {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        span.set_attribute("gen_ai.tool.call.arguments", call.arguments.clone());
    }
    span
}

/// Records a tool call's answer (when captured) or failure on its span.
#[cfg(feature = "agui")]
pub(crate) fn tool_ended(span: &tracing::Span, answer: Result<&String, &str>) {
    match answer {
        Ok(_text) =>
        {
            #[cfg(feature = "opentelemetry")]
            if capture_content() {
                use tracing_opentelemetry::OpenTelemetrySpanExt;
                span.set_attribute("gen_ai.tool.call.result", _text.clone());
            }
        }
        Err(error) => {
            span.record("error.type", "_OTHER");
            span.record("otel.status_code", "error");
            span.record("otel.status_description", error);
        }
    }
}
