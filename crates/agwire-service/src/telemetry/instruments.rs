//! `/metrics` over OTLP: the same counters, observed at each export (no
//! cost between exports), and the append-latency histogram recorded as it
//! happens. The runs-by-status gauge is left to `/metrics`: it is a
//! database query, not a counter, and one replica's scrape answers it for
//! all.

use std::sync::Arc;

use opentelemetry::KeyValue;

use super::SpanCounts;
use crate::engine::Engine;

pub(super) fn register(engine: &Engine, spans: &Arc<SpanCounts>) {
    let meter = opentelemetry::global::meter("agwire");
    let metrics = engine.metrics.clone();
    let m = metrics.clone();
    meter
        .u64_observable_counter("agwire.runs.accepted")
        .with_unit("{run}")
        .with_description("Runs accepted by this process.")
        .with_callback(move |observer| observer.observe(m.accepted(), &[]))
        .build();
    let m = metrics.clone();
    meter
        .u64_observable_counter("agwire.events.appended")
        .with_unit("{event}")
        .with_description("Events appended to run logs.")
        .with_callback(move |observer| observer.observe(m.events_appended(), &[]))
        .build();
    let m = metrics.clone();
    meter
        .u64_observable_counter("agwire.tool_calls.expired")
        .with_unit("{tool_call}")
        .with_description(
            "Pending frontend tool calls this process's sweep found past their expiry.",
        )
        .with_callback(move |observer| observer.observe(m.tool_calls_expired_total(), &[]))
        .build();
    let m = metrics.clone();
    meter
        .u64_observable_counter("agwire.webhook.deliveries")
        .with_unit("{attempt}")
        .with_description("Webhook delivery attempts by this process, by outcome.")
        .with_callback(move |observer| {
            for (outcome, n) in m.webhook_deliveries() {
                observer.observe(n, &[KeyValue::new("outcome", outcome)]);
            }
        })
        .build();
    let m = metrics.clone();
    meter
        .i64_observable_up_down_counter("agwire.streams.active")
        .with_unit("{stream}")
        .with_description("Event streams open now.")
        .with_callback(move |observer| observer.observe(m.active_streams(), &[]))
        .build();
    let e = engine.clone();
    meter
        .i64_observable_up_down_counter("agwire.runs.executing")
        .with_unit("{run}")
        .with_description("Runs executing on this process.")
        .with_callback(move |observer| {
            observer.observe(i64::try_from(e.running()).unwrap_or(i64::MAX), &[]);
        })
        .build();
    let e = engine.clone();
    meter
        .i64_observable_up_down_counter("agwire.live_channels")
        .with_unit("{run}")
        .with_description("Runs with a live event channel on this process.")
        .with_callback(move |observer| {
            observer.observe(i64::try_from(e.hub.len()).unwrap_or(i64::MAX), &[]);
        })
        .build();
    let s = spans.clone();
    meter
        .u64_observable_counter("agwire.otel.spans.exported")
        .with_unit("{span}")
        .with_description("Spans this process exported over OTLP.")
        .with_callback(move |observer| observer.observe(s.exported(), &[]))
        .build();
    let s = spans.clone();
    meter
        .u64_observable_counter("agwire.otel.spans.dropped")
        .with_unit("{span}")
        .with_description("Spans this process dropped, by reason.")
        .with_callback(move |observer| {
            observer.observe(s.failed(), &[KeyValue::new("reason", "export_failed")]);
            observer.observe(s.queue_full(), &[KeyValue::new("reason", "queue_full")]);
        })
        .build();
    metrics.export_appends(
        meter
            .f64_histogram("agwire.event.append.duration")
            .with_unit("s")
            .with_description("Time to append one batch of events (one transaction).")
            .with_boundaries(vec![
                0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            ])
            .build(),
    );
}
