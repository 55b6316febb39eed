//! Counters behind `/metrics` (Prometheus text exposition 0.0.4).
//!
//! Atomics only: recording sits on the append path of every event batch, so
//! it must cost a few nanoseconds and never a lock.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::run::RunStatus;

/// Upper bounds (seconds) of the append-latency histogram buckets.
const APPEND_BUCKETS: [f64; 12] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// The service's counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    accepted: AtomicU64,
    events_appended: AtomicU64,
    active_streams: AtomicI64,
    append_buckets: [AtomicU64; APPEND_BUCKETS.len()],
    append_count: AtomicU64,
    append_sum_ns: AtomicU64,
    tool_calls_expired: AtomicU64,
    webhooks_delivered: AtomicU64,
    webhooks_failed: AtomicU64,
    webhooks_given_up: AtomicU64,
    /// The append histogram over OTLP too, when metrics are exported.
    otel_append: std::sync::OnceLock<opentelemetry::metrics::Histogram<f64>>,
}

impl Metrics {
    pub(crate) fn run_accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// One batch of `events` appended to a log in `took`.
    pub(crate) fn appended(&self, events: usize, took: Duration) {
        self.events_appended
            .fetch_add(events as u64, Ordering::Relaxed);
        let seconds = took.as_secs_f64();
        for (bucket, bound) in self.append_buckets.iter().zip(APPEND_BUCKETS) {
            if seconds <= bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.append_count.fetch_add(1, Ordering::Relaxed);
        self.append_sum_ns.fetch_add(
            u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        if let Some(histogram) = self.otel_append.get() {
            histogram.record(seconds, &[]);
        }
    }

    /// Records appends on `histogram` too (OTLP metrics).
    pub(crate) fn export_appends(&self, histogram: opentelemetry::metrics::Histogram<f64>) {
        let _ = self.otel_append.set(histogram);
    }

    /// Runs accepted by this process.
    pub(crate) fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Events appended by this process.
    pub(crate) fn events_appended(&self) -> u64 {
        self.events_appended.load(Ordering::Relaxed)
    }

    /// Event streams open now.
    pub(crate) fn active_streams(&self) -> i64 {
        self.active_streams.load(Ordering::Relaxed)
    }

    /// Pending tool calls the sweep expired.
    pub(crate) fn tool_calls_expired_total(&self) -> u64 {
        self.tool_calls_expired.load(Ordering::Relaxed)
    }

    /// Webhook attempts by outcome.
    pub(crate) fn webhook_deliveries(&self) -> [(&'static str, u64); 3] {
        [
            ("delivered", self.webhooks_delivered.load(Ordering::Relaxed)),
            ("failed", self.webhooks_failed.load(Ordering::Relaxed)),
            ("given_up", self.webhooks_given_up.load(Ordering::Relaxed)),
        ]
    }

    /// The sweep marked `n` pending tool calls expired.
    pub(crate) fn tool_calls_expired(&self, n: u64) {
        self.tool_calls_expired.fetch_add(n, Ordering::Relaxed);
    }

    /// A webhook message delivered (2xx).
    pub(crate) fn webhook_delivered(&self) {
        self.webhooks_delivered.fetch_add(1, Ordering::Relaxed);
    }

    /// A webhook attempt failed; it goes again later.
    pub(crate) fn webhook_failed(&self) {
        self.webhooks_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A webhook attempt failed for the last time; it is given up.
    pub(crate) fn webhook_given_up(&self) {
        self.webhooks_given_up.fetch_add(1, Ordering::Relaxed);
    }

    /// A stream opened; the guard counts it until dropped.
    pub(crate) fn stream_opened(metrics: &std::sync::Arc<Self>) -> StreamGuard {
        metrics.active_streams.fetch_add(1, Ordering::Relaxed);
        StreamGuard(metrics.clone())
    }

    /// The exposition, with `runs` (status, count) read from the store and
    /// what this process holds now.
    pub(crate) fn render(&self, runs: &[(RunStatus, i64)], held: Held) -> String {
        let mut out = String::with_capacity(2048);
        let _ = writeln!(out, "# HELP agwire_runs Runs by status.");
        let _ = writeln!(out, "# TYPE agwire_runs gauge");
        for status in RunStatus::ALL {
            let n = runs
                .iter()
                .find(|(s, _)| *s == status)
                .map_or(0, |(_, n)| *n);
            let _ = writeln!(out, "agwire_runs{{status=\"{status}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP agwire_runs_accepted_total Runs accepted by this process."
        );
        let _ = writeln!(out, "# TYPE agwire_runs_accepted_total counter");
        let _ = writeln!(
            out,
            "agwire_runs_accepted_total {}",
            self.accepted.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP agwire_tool_calls_expired_total Pending frontend tool calls (approvals) this process's sweep found past their expiry."
        );
        let _ = writeln!(out, "# TYPE agwire_tool_calls_expired_total counter");
        let _ = writeln!(
            out,
            "agwire_tool_calls_expired_total {}",
            self.tool_calls_expired.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP agwire_webhook_deliveries_total Webhook delivery attempts by this process, by outcome (failed: to be retried; given_up: the last one failed)."
        );
        let _ = writeln!(out, "# TYPE agwire_webhook_deliveries_total counter");
        for (outcome, n) in [
            ("delivered", &self.webhooks_delivered),
            ("failed", &self.webhooks_failed),
            ("given_up", &self.webhooks_given_up),
        ] {
            let _ = writeln!(
                out,
                "agwire_webhook_deliveries_total{{outcome=\"{outcome}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        if let Some(pending) = held.webhooks_pending {
            let _ = writeln!(
                out,
                "# HELP agwire_webhooks_pending Webhook messages not yet delivered nor given up (every process's: from the store)."
            );
            let _ = writeln!(out, "# TYPE agwire_webhooks_pending gauge");
            let _ = writeln!(out, "agwire_webhooks_pending {pending}");
        }
        let _ = writeln!(out, "# HELP agwire_active_streams Event streams open now.");
        let _ = writeln!(out, "# TYPE agwire_active_streams gauge");
        let _ = writeln!(
            out,
            "agwire_active_streams {}",
            self.active_streams.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP agwire_runs_executing Runs executing on this process."
        );
        let _ = writeln!(out, "# TYPE agwire_runs_executing gauge");
        let _ = writeln!(out, "agwire_runs_executing {}", held.executing);
        let _ = writeln!(
            out,
            "# HELP agwire_live_channels Runs with a live event channel on this process (executing here, or followed)."
        );
        let _ = writeln!(out, "# TYPE agwire_live_channels gauge");
        let _ = writeln!(out, "agwire_live_channels {}", held.live_channels);
        let _ = writeln!(
            out,
            "# HELP agwire_events_appended_total Events appended to run logs."
        );
        let _ = writeln!(out, "# TYPE agwire_events_appended_total counter");
        let _ = writeln!(
            out,
            "agwire_events_appended_total {}",
            self.events_appended.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP agwire_event_append_seconds Time to append one batch of events (one transaction)."
        );
        let _ = writeln!(out, "# TYPE agwire_event_append_seconds histogram");
        for (bucket, bound) in self.append_buckets.iter().zip(APPEND_BUCKETS) {
            let _ = writeln!(
                out,
                "agwire_event_append_seconds_bucket{{le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let count = self.append_count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "agwire_event_append_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let sum = self.append_sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "agwire_event_append_seconds_sum {sum}");
        let _ = writeln!(out, "agwire_event_append_seconds_count {count}");
        if let Some(spans) = held.spans {
            let _ = writeln!(
                out,
                "# HELP agwire_otel_spans_exported_total Spans this process exported over OTLP."
            );
            let _ = writeln!(out, "# TYPE agwire_otel_spans_exported_total counter");
            let _ = writeln!(out, "agwire_otel_spans_exported_total {}", spans.exported);
            let _ = writeln!(
                out,
                "# HELP agwire_otel_spans_dropped_total Spans this process dropped, by reason (export_failed: the collector refused them or could not be reached; queue_full: more waited than the export queue holds)."
            );
            let _ = writeln!(out, "# TYPE agwire_otel_spans_dropped_total counter");
            for (reason, n) in [
                ("export_failed", spans.export_failed),
                ("queue_full", spans.queue_full),
            ] {
                let _ = writeln!(
                    out,
                    "agwire_otel_spans_dropped_total{{reason=\"{reason}\"}} {n}"
                );
            }
        }
        out
    }
}

/// What this process holds now (gauges that must return to zero when it is
/// idle: nothing per run outlives the run).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Held {
    /// Runs executing here.
    pub(crate) executing: usize,
    /// Live event channels in the hub.
    pub(crate) live_channels: usize,
    /// Webhook messages still to deliver (read from the store when webhooks
    /// are on).
    pub(crate) webhooks_pending: Option<u64>,
    /// What the OTLP export did (when telemetry is on).
    pub(crate) spans: Option<SpansExported>,
}

/// Spans exported and dropped since the start.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SpansExported {
    pub(crate) exported: u64,
    pub(crate) export_failed: u64,
    pub(crate) queue_full: u64,
}

/// Counts one open stream while alive.
#[derive(Debug)]
pub(crate) struct StreamGuard(std::sync::Arc<Metrics>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.active_streams.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_streams_are_counted_while_open() {
        let metrics = std::sync::Arc::new(Metrics::default());
        metrics.appended(3, Duration::from_micros(300));
        metrics.appended(1, Duration::from_secs(2));
        let guard = Metrics::stream_opened(&metrics);
        let text = metrics.render(&[(RunStatus::Running, 2)], Held::default());
        assert!(
            text.contains("agwire_runs{status=\"running\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("agwire_runs{status=\"failed\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("agwire_events_appended_total 4\n"), "{text}");
        assert!(text.contains("agwire_event_append_seconds_bucket{le=\"0.00025\"} 0\n"));
        assert!(text.contains("agwire_event_append_seconds_bucket{le=\"0.0005\"} 1\n"));
        assert!(text.contains("agwire_event_append_seconds_bucket{le=\"1\"} 1\n"));
        assert!(text.contains("agwire_event_append_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("agwire_active_streams 1\n"));
        drop(guard);
        assert!(
            metrics
                .render(&[], Held::default())
                .contains("agwire_active_streams 0\n")
        );
    }
}
