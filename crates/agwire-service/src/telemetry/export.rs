//! The exporters, and the counts of what they sent and dropped.
//!
//! Spans go through the SDK's `BatchSpanProcessor` (a thread of its own,
//! batches, a bounded queue) to the OTLP/HTTP exporter. Two thin wrappers
//! count on the way: [`CountingProcessor`] drops a span itself when as many
//! are waiting as the queue holds (so every drop is counted here; the SDK's
//! queue never overflows), and [`CountingExporter`] counts what each
//! export sent or lost. A collector that is down costs an export attempt
//! per batch, never a request's time: ending a span only queues it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanExporter};

use super::config::{Protocol, Settings};
use crate::error::Error;

/// Spans exported and dropped by this process since it started.
#[derive(Debug, Default)]
pub(crate) struct SpanCounts {
    /// Ended and not yet exported nor dropped.
    pending: AtomicU64,
    exported: AtomicU64,
    /// The collector refused them or could not be reached.
    failed: AtomicU64,
    /// More were waiting than the queue holds.
    queue_full: AtomicU64,
    /// When export failures were last logged.
    warned: std::sync::Mutex<Option<Instant>>,
}

impl SpanCounts {
    pub(crate) fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    pub(crate) fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    pub(crate) fn queue_full(&self) -> u64 {
        self.queue_full.load(Ordering::Relaxed)
    }
}

/// The queue's size (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2,048).
fn queue_size() -> usize {
    std::env::var("OTEL_BSP_MAX_QUEUE_SIZE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(2048)
}

/// The batch processor, counting.
#[derive(Debug)]
pub(super) struct CountingProcessor {
    inner: BatchSpanProcessor,
    counts: Arc<SpanCounts>,
    capacity: u64,
}

impl CountingProcessor {
    pub(super) fn new(exporter: CountingExporter, counts: Arc<SpanCounts>) -> Self {
        let capacity = queue_size();
        // The other OTEL_BSP_* variables are read by the builder.
        let config = BatchConfigBuilder::default()
            .with_max_queue_size(capacity)
            .build();
        Self {
            inner: BatchSpanProcessor::builder(exporter)
                .with_batch_config(config)
                .build(),
            counts,
            capacity: capacity as u64,
        }
    }
}

impl opentelemetry_sdk::trace::SpanProcessor for CountingProcessor {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let waiting = self.counts.pending.fetch_add(1, Ordering::Relaxed);
        if waiting >= self.capacity {
            self.counts.pending.fetch_sub(1, Ordering::Relaxed);
            self.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP span exporter, counting.
#[derive(Debug)]
pub(super) struct CountingExporter {
    inner: opentelemetry_otlp::SpanExporter,
    counts: Arc<SpanCounts>,
}

impl SpanExporter for CountingExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                self.counts.exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(error) => {
                self.counts.failed.fetch_add(n, Ordering::Relaxed);
                warn_now_and_then(&self.counts, n, error);
            }
        }
        self.counts.pending.fetch_sub(n, Ordering::Relaxed);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// A failed export, logged at most once a minute (a collector that is
/// down must not flood the logs).
fn warn_now_and_then(counts: &SpanCounts, spans: u64, error: &dyn std::fmt::Display) {
    let Ok(mut warned) = counts.warned.lock() else {
        return;
    };
    if warned.is_some_and(|at| at.elapsed() < Duration::from_secs(60)) {
        return;
    }
    *warned = Some(Instant::now());
    tracing::warn!(
        %error,
        spans,
        dropped_so_far = counts.failed(),
        "could not export spans to the OTLP collector; they are dropped (agwire_otel_spans_dropped_total)"
    );
}

fn headers(settings: &Settings) -> HashMap<String, String> {
    settings
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn protocol(settings: &Settings) -> opentelemetry_otlp::Protocol {
    match settings.protocol {
        Protocol::Protobuf => opentelemetry_otlp::Protocol::HttpBinary,
        Protocol::Json => opentelemetry_otlp::Protocol::HttpJson,
    }
}

pub(super) fn span_exporter(
    settings: &Settings,
    counts: Arc<SpanCounts>,
) -> Result<CountingExporter, Error> {
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol(settings))
        .with_headers(headers(settings));
    if let Some(endpoint) = &settings.endpoint {
        builder = builder.with_endpoint(format!("{endpoint}/v1/traces"));
    }
    let inner = builder
        .build()
        .map_err(|e| Error::Config(format!("telemetry: {e}")))?;
    Ok(CountingExporter { inner, counts })
}

pub(super) fn meter_provider(
    settings: &Settings,
    resource: opentelemetry_sdk::Resource,
) -> Result<opentelemetry_sdk::metrics::SdkMeterProvider, Error> {
    let mut builder = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(protocol(settings))
        .with_headers(headers(settings));
    if let Some(endpoint) = &settings.endpoint {
        builder = builder.with_endpoint(format!("{endpoint}/v1/metrics"));
    }
    let exporter = builder
        .build()
        .map_err(|e| Error::Config(format!("telemetry: {e}")))?;
    let mut reader = opentelemetry_sdk::metrics::PeriodicReader::builder(exporter);
    if let Some(interval) = settings.metrics_interval {
        reader = reader.with_interval(interval);
    }
    Ok(opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(reader.build())
        .with_resource(resource)
        .build())
}
