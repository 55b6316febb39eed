//! Traces and metrics over OTLP (OpenTelemetry), off unless an endpoint is
//! set.
//!
//! The service's spans are `tracing` spans; with telemetry on, the binary
//! installs [`Telemetry::layer`] (`tracing-opentelemetry`) beside its log
//! layer and they are exported. The span tree of one run:
//!
//! - `POST /api/v1/agent/runs` (server span, HTTP semantic conventions;
//!   a child of the caller's span when the request carries `traceparent`)
//! - `ag_ui.run` (from the claim to the end, on whichever replica executes
//!   it: its parent is the accepting span, kept with the run as
//!   [`RunOptions::trace_parent`](crate::store::RunOptions))
//!   - `chat {model}` per model call (router, worker: agwire-llm's
//!     [`Traced`](agwire_llm::telemetry::Traced), GenAI conventions)
//!   - `execute_tool {name}` per backend tool call
//!   - `{operation} {store}` for a store write slower than the threshold
//! - `ag_ui.run.stream` for each reader of the run's log elsewhere (its
//!   parent is the run's accepting span, linked to the reader's request)
//!
//! Off, nothing here runs: the spans meant only for export have a target
//! ([`OTEL_TARGET`]) no log filter enables, the request span keeps its log
//! fields, and the checks are one `Option` each.

mod config;
mod export;
mod instruments;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, Tracer as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub use config::{TelemetryConfig, UserAttribute};
pub(crate) use export::SpanCounts;

use crate::error::Error;

/// The target of the spans that exist only to be exported (the run's,
/// a stream's, a job tick's): no log filter shows them.
pub const OTEL_TARGET: &str = "agwire::otel";

/// Traces and metrics export, or nothing (cheap to clone).
#[derive(Clone, Default)]
pub struct Telemetry(Option<Arc<Inner>>);

struct Inner {
    tracers: opentelemetry_sdk::trace::SdkTracerProvider,
    tracer: opentelemetry_sdk::trace::SdkTracer,
    meters: Option<opentelemetry_sdk::metrics::SdkMeterProvider>,
    counts: Arc<SpanCounts>,
    user: UserAttribute,
    slow_write: Duration,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("on", &self.is_on())
            .finish()
    }
}

impl Telemetry {
    /// No export.
    pub fn off() -> Self {
        Self(None)
    }

    /// Starts exporting as `config` and the standard `OTEL_*` variables say
    /// (a variable wins over the file); [`Telemetry::off`] when neither
    /// names an endpoint, or `OTEL_SDK_DISABLED=true`. Installs the W3C
    /// trace-context propagator and the global meter provider (the GenAI
    /// metrics of agwire-llm use it).
    pub fn start(config: &TelemetryConfig) -> Result<Self, Error> {
        let Some(settings) = config::Settings::resolve(config)? else {
            return Ok(Self::off());
        };
        let counts = Arc::new(SpanCounts::default());
        let resource = settings.resource();
        let processor = export::CountingProcessor::new(
            export::span_exporter(&settings, counts.clone())?,
            counts.clone(),
        );
        let mut tracers = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource.clone());
        if let Some(sampler) = settings.sampler() {
            tracers = tracers.with_sampler(sampler);
        }
        let tracers = tracers.build();
        let tracer = opentelemetry::trace::TracerProvider::tracer(&tracers, "agwire");
        let meters = match settings.metrics {
            true => Some(export::meter_provider(&settings, resource)?),
            false => None,
        };
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        if let Some(meters) = &meters {
            opentelemetry::global::set_meter_provider(meters.clone());
        }
        agwire_llm::telemetry::set_capture_content(settings.capture_content);
        Ok(Self(Some(Arc::new(Inner {
            tracers,
            tracer,
            meters,
            counts,
            user: config.user,
            slow_write: Duration::from_millis(config.slow_store_write_ms),
        }))))
    }

    /// Whether spans are exported.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// The `tracing` layer that exports the service's spans (`None` when
    /// off). It sees the spans meant for traces — the request's, the
    /// run's and its model and tool calls' — and warnings and errors
    /// logged inside them (as span events); not the log-only spans.
    pub fn layer<S>(&self) -> Option<impl tracing_subscriber::Layer<S> + use<S>>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        use tracing_subscriber::Layer as _;
        let inner = self.0.as_ref()?;
        let layer = tracing_opentelemetry::layer()
            .with_tracer(inner.tracer.clone())
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            // Busy and idle nanoseconds on every span: noise beside its
            // duration.
            .with_tracked_inactivity(false)
            .with_filter(tracing_subscriber::filter::filter_fn(exported));
        Some(layer)
    }

    /// Exports what is buffered and stops (at shutdown).
    pub fn shutdown(&self) {
        if let Some(inner) = &self.0 {
            let _ = inner.tracers.shutdown();
            if let Some(meters) = &inner.meters {
                let _ = meters.shutdown();
            }
        }
    }

    /// Spans exported, and dropped (the collector failed or the queue was
    /// full), since the start.
    pub(crate) fn counts(&self) -> Option<&SpanCounts> {
        self.0.as_ref().map(|inner| &*inner.counts)
    }

    /// The current span as a W3C `traceparent`, to keep with a run (`None`
    /// when off, or when there is no sampled trace to continue).
    pub(crate) fn current_parent(&self) -> Option<String> {
        self.0.as_ref()?;
        let context = tracing::Span::current().context();
        let span = context.span();
        let span = span.span_context();
        span.is_valid().then(|| traceparent(span))
    }

    /// The span of a run's execution (`Span::none()` when off): a child of
    /// the span that accepted the run (`trace_parent`), with the
    /// attributes that find it. `log` (the run's log span) gets its trace
    /// id, so the run's log lines name the trace.
    pub(crate) fn run_span(
        &self,
        run: &crate::store::Claimed,
        log: &tracing::Span,
    ) -> tracing::Span {
        let Some(inner) = &self.0 else {
            return tracing::Span::none();
        };
        let input = &run.input;
        let parent = run.options.trace_parent.as_deref().map(extract);
        // A trace the sampler dropped: a bare span, there only so that the
        // run's model calls know (and skip their own).
        if let Some(parent) = parent.as_ref().filter(|p| !sampled(p)) {
            let span = tracing::info_span!(target: OTEL_TARGET, parent: None, "ag_ui.run");
            let _ = span.set_parent(parent.clone());
            return span;
        }
        let span = tracing::info_span!(
            target: OTEL_TARGET,
            parent: None,
            "ag_ui.run",
            otel.kind = "internal",
            otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.conversation.id = %input.thread_id,
            ag_ui.thread_id = %input.thread_id,
            ag_ui.run_id = %input.run_id,
            agwire.task_id = %run.task_id,
            ag_ui.run.outcome = tracing::field::Empty,
            ag_ui.run.event_count = tracing::field::Empty,
        );
        if let Some(parent) = parent {
            let _ = span.set_parent(parent);
        }
        if let Some((key, value)) = inner.user.attribute(&run.user_id) {
            span.set_attribute(key, value);
        }
        let context = span.context();
        let trace = context.span().span_context().trace_id();
        if trace != opentelemetry::trace::TraceId::INVALID {
            log.record("trace_id", tracing::field::display(trace));
        }
        span
    }

    /// The span of one reader of a run's log (`Span::none()` when off, or
    /// for a run without a trace): in the run's trace, linked to the
    /// reader's request.
    pub(crate) fn stream_span(&self, run: &crate::store::RunRecord, after: u64) -> tracing::Span {
        if self.0.is_none() {
            return tracing::Span::none();
        }
        let Some(parent) = run.options.trace_parent.as_deref().map(extract) else {
            return tracing::Span::none();
        };
        if !sampled(&parent) {
            return tracing::Span::none();
        }
        let request = tracing::Span::current().context();
        let span = tracing::info_span!(
            target: OTEL_TARGET,
            parent: None,
            "ag_ui.run.stream",
            otel.kind = "internal",
            ag_ui.thread_id = %run.thread_id,
            ag_ui.run_id = %run.run_id,
            ag_ui.stream.after = i64::try_from(after).unwrap_or(i64::MAX),
        );
        let _ = span.set_parent(parent);
        span.add_link(request.span().span_context().clone());
        span
    }

    /// A store write that took at least the threshold since `started`, as
    /// a span of its own under the current one (`operation`: what it
    /// wrote, `store`: the store's [`database`](crate::store::RunStore::database)).
    pub(crate) fn store_write(
        &self,
        operation: &'static str,
        store: &'static str,
        started: Instant,
    ) {
        let Some(inner) = &self.0 else {
            return;
        };
        let took = started.elapsed();
        if took < inner.slow_write {
            return;
        }
        // The conventions' name of the database.
        let store = match store {
            "postgres" => "postgresql",
            other => other,
        };
        let end = SystemTime::now();
        let start = end.checked_sub(took).unwrap_or(end);
        let parent = tracing::Span::current().context();
        let mut span = inner
            .tracer
            .span_builder(format!("{operation} {store}"))
            .with_kind(opentelemetry::trace::SpanKind::Client)
            .with_start_time(start)
            .with_attributes([
                opentelemetry::KeyValue::new("db.system.name", store),
                opentelemetry::KeyValue::new("db.operation.name", operation),
                opentelemetry::KeyValue::new(
                    "agwire.store.slow_write_threshold_ms",
                    i64::try_from(inner.slow_write.as_millis()).unwrap_or(i64::MAX),
                ),
            ])
            .start_with_context(&inner.tracer, &parent);
        opentelemetry::trace::Span::end_with_timestamp(&mut span, end);
    }

    /// The trace of the current span, for `RUN_STARTED`'s metadata
    /// (`trace_id`, `traceparent`) when it is sampled.
    pub(crate) fn run_started_metadata(
        &self,
    ) -> Option<serde_json::Map<String, serde_json::Value>> {
        self.0.as_ref()?;
        let context = tracing::Span::current().context();
        let span = context.span();
        let span = span.span_context();
        if !span.is_valid() || !span.is_sampled() {
            return None;
        }
        let mut metadata = serde_json::Map::new();
        metadata.insert("trace_id".into(), span.trace_id().to_string().into());
        metadata.insert("traceparent".into(), traceparent(span).into());
        Some(metadata)
    }

    /// The OTLP instruments mirroring `/metrics`, observing `engine`.
    pub(crate) fn register_metrics(&self, engine: &crate::engine::Engine) {
        if let Some(inner) = &self.0
            && inner.meters.is_some()
        {
            instruments::register(engine, &inner.counts);
        }
    }
}

/// What the export layer sees: the spans meant for traces, and warnings
/// and errors inside them.
fn exported(meta: &tracing::Metadata<'_>) -> bool {
    let target = meta.target();
    if meta.is_span() {
        target == OTEL_TARGET
            || target.starts_with("agwire_llm")
            || (meta.name() == "request" && target.starts_with("agwire_service::api"))
    } else {
        *meta.level() <= tracing::Level::WARN && target.starts_with("agwire")
    }
}

/// The W3C `traceparent` of `span`.
fn traceparent(span: &opentelemetry::trace::SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        span.trace_id(),
        span.span_id(),
        span.trace_flags().to_u8()
    )
}

/// Whether `context`'s trace is sampled.
fn sampled(context: &opentelemetry::Context) -> bool {
    context.span().span_context().is_sampled()
}

/// The context a `traceparent` names.
fn extract(traceparent: &str) -> opentelemetry::Context {
    let mut carrier = std::collections::HashMap::new();
    carrier.insert("traceparent".to_owned(), traceparent.to_owned());
    TraceContextPropagator::new().extract(&carrier)
}

/// The caller's trace context in a request's headers (W3C).
pub(crate) fn extract_headers(headers: &axum::http::HeaderMap) -> opentelemetry::Context {
    struct Headers<'a>(&'a axum::http::HeaderMap);
    impl opentelemetry::propagation::Extractor for Headers<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).and_then(|v| v.to_str().ok())
        }
        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(axum::http::HeaderName::as_str).collect()
        }
    }
    TraceContextPropagator::new().extract(&Headers(headers))
}
