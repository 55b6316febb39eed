//! The OTLP receiver, judged by the real exporter: opentelemetry-otlp's HTTP
//! exporters (protobuf and JSON) send what the SDK recorded, and every id,
//! kind, attribute (with its type), event, link, status, resource and scope
//! must come out of the receiver as the SDK has it. Then what a collector
//! in trouble does to the exporter, the bodies that are refused, and
//! OTLP/JSON as other SDKs write it.
//!
//! The SDK's parts run on blocking threads: its batch processors export
//! from threads of their own through the blocking reqwest client, and its
//! `force_flush` blocks until they have, so on the test's (current-thread)
//! runtime, which serves the receiver, it would wait for itself.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::Arc;
use std::time::Duration;

use agwire_testkit::otlp::{
    MetricKind, MetricPoint, Receiver, Span, SpanKind, StatusCode, trace_tree,
};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::{
    Link, Span as _, SpanKind as OtelSpanKind, Status, TraceContextExt as _, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Array, Context, KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::json;

/// What a test waits at most for an export that takes milliseconds.
const BOUND: Duration = Duration::from_secs(20);

const SCOPE: &str = "agwire.testkit.otlp";

fn resource(service: &str) -> Resource {
    Resource::builder()
        .with_service_name(service.to_owned())
        .with_attribute(KeyValue::new("deployment.environment.name", "test"))
        .build()
}

fn tracer_provider(url: &str, protocol: Protocol) -> SdkTracerProvider {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(url)
        .build()
        .unwrap();
    SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource("otlp-receiver-test"))
        .build()
}

fn meter_provider(url: &str, protocol: Protocol) -> SdkMeterProvider {
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(url)
        .build()
        .unwrap();
    SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter).build())
        .with_resource(resource("otlp-receiver-test"))
        .build()
}

/// The ids the SDK gave the spans it exported.
#[derive(Debug)]
struct Sent {
    trace_id: String,
    server: String,
    client: String,
    linked_trace: String,
    linked: String,
}

/// A server span with attributes of every type and an event; under it a
/// client span with an error status and a link to a third span (a trace of
/// its own).
fn send_trace(url: &str, protocol: Protocol) -> Sent {
    let provider = tracer_provider(url, protocol);
    let tracer = provider.tracer(SCOPE);

    let mut linked = tracer
        .span_builder("linked.work")
        .with_kind(OtelSpanKind::Internal)
        .start(&tracer);
    let linked_context = linked.span_context().clone();
    linked.end();

    let mut server = tracer
        .span_builder("POST /runs")
        .with_kind(OtelSpanKind::Server)
        .with_attributes([
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("http.response.status_code", 200_i64),
            KeyValue::new("big", i64::MAX),
            KeyValue::new("negative", -7_i64),
            KeyValue::new("load", 0.25_f64),
            KeyValue::new("whole.double", 2.0_f64),
            KeyValue::new("cached", true),
            KeyValue::new(
                "tags",
                Value::Array(Array::String(vec!["alpha".into(), "beta".into()])),
            ),
            KeyValue::new("ports", Value::Array(Array::I64(vec![80, 443]))),
            KeyValue::new("unicode", "héllo ✓"),
        ])
        .start(&tracer);
    server.add_event(
        "run.accepted",
        vec![
            KeyValue::new("run.id", "run-1"),
            KeyValue::new("queue.depth", 3_i64),
        ],
    );
    let server_context = server.span_context().clone();
    let cx = Context::current_with_span(server);

    let mut client = tracer
        .span_builder("chat model")
        .with_kind(OtelSpanKind::Client)
        .with_attributes([KeyValue::new("gen_ai.system", "openai")])
        .with_links(vec![Link::new(
            linked_context.clone(),
            vec![KeyValue::new("link.reason", "retry of")],
            0,
        )])
        .start_with_context(&tracer, &cx);
    client.set_status(Status::error("upstream answered 503"));
    let client_context = client.span_context().clone();
    client.end();
    cx.span().end();

    provider.force_flush().unwrap();
    provider.shutdown().unwrap();
    Sent {
        trace_id: server_context.trace_id().to_string(),
        server: server_context.span_id().to_string(),
        client: client_context.span_id().to_string(),
        linked_trace: linked_context.trace_id().to_string(),
        linked: linked_context.span_id().to_string(),
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| panic!("no span {name:?} among {spans:#?}"))
}

async fn a_trace_arrives_whole(protocol: Protocol) {
    let receiver = Receiver::start().await;
    let url = receiver.traces_url();
    let sent = tokio::task::spawn_blocking(move || send_trace(&url, protocol))
        .await
        .unwrap();
    let spans = receiver
        .wait_spans(BOUND, "the three spans", |spans| spans.len() >= 3)
        .await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    assert_eq!(receiver.requests(), 1, "one batch, one export");
    let tree = trace_tree(&spans, &sent.trace_id);

    let server = named(&spans, "POST /runs");
    assert_eq!(server.trace_id, sent.trace_id, "{tree}");
    assert_eq!(server.trace_id.len(), 32);
    assert_eq!(server.span_id, sent.server);
    assert_eq!(server.span_id.len(), 16);
    assert_eq!(server.parent_span_id, None, "{tree}");
    assert_eq!(server.kind, SpanKind::Server);
    assert_eq!(server.status_code, StatusCode::Unset);
    assert!(server.start_unix_nano > 0 && server.start_unix_nano <= server.end_unix_nano);
    // Every attribute, with its type: the object compares numbers by kind
    // (200 is an integer, 2.0 a double); and in the order they were set.
    assert_eq!(
        serde_json::Value::Object(server.attributes.clone()),
        json!({
            "http.request.method": "POST",
            "http.response.status_code": 200,
            "big": i64::MAX,
            "negative": -7,
            "load": 0.25,
            "whole.double": 2.0,
            "cached": true,
            "tags": ["alpha", "beta"],
            "ports": [80, 443],
            "unicode": "héllo ✓",
        })
    );
    let keys: Vec<&str> = server.attributes.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "http.request.method",
            "http.response.status_code",
            "big",
            "negative",
            "load",
            "whole.double",
            "cached",
            "tags",
            "ports",
            "unicode"
        ]
    );
    assert!(server.attr("whole.double").unwrap().is_f64());
    assert!(server.attr("http.response.status_code").unwrap().is_i64());
    assert_eq!(server.attr_str("http.request.method"), Some("POST"));
    assert_eq!(server.attr_i64("big"), Some(i64::MAX));
    assert_eq!(server.attr_i64("load"), None, "a double is no integer");
    assert_eq!(server.attr_f64("load"), Some(0.25));
    assert_eq!(server.attr_bool("cached"), Some(true));
    assert_eq!(server.events.len(), 1);
    let event = server.event("run.accepted").unwrap();
    assert_eq!(
        serde_json::Value::Object(event.attributes.clone()),
        json!({"run.id": "run-1", "queue.depth": 3})
    );
    assert!(event.time_unix_nano >= server.start_unix_nano);
    assert!(event.time_unix_nano <= server.end_unix_nano);
    assert_eq!(server.scope, SCOPE);
    assert_eq!(
        server.resource.get("service.name"),
        Some(&json!("otlp-receiver-test"))
    );
    assert_eq!(
        server.resource.get("deployment.environment.name"),
        Some(&json!("test"))
    );
    assert_eq!(
        server.resource.get("telemetry.sdk.language"),
        Some(&json!("rust"))
    );

    let client = named(&spans, "chat model");
    assert_eq!(client.trace_id, sent.trace_id);
    assert_eq!(client.span_id, sent.client);
    assert_eq!(
        client.parent_span_id.as_deref(),
        Some(sent.server.as_str()),
        "{tree}"
    );
    assert_eq!(client.kind, SpanKind::Client);
    assert_eq!(client.status_code, StatusCode::Error);
    assert_eq!(client.status_message, "upstream answered 503");
    assert_eq!(client.attr_str("gen_ai.system"), Some("openai"));
    assert_eq!(client.links.len(), 1);
    assert_eq!(client.links[0].trace_id, sent.linked_trace);
    assert_eq!(client.links[0].span_id, sent.linked);
    assert_eq!(
        serde_json::Value::Object(client.links[0].attributes.clone()),
        json!({"link.reason": "retry of"})
    );
    assert!(client.start_unix_nano >= server.start_unix_nano);
    assert!(client.end_unix_nano <= server.end_unix_nano);

    let linked = named(&spans, "linked.work");
    assert_eq!(linked.trace_id, sent.linked_trace);
    assert_ne!(linked.trace_id, sent.trace_id, "a root of its own trace");
    assert_eq!(linked.kind, SpanKind::Internal);
    assert_eq!(linked.parent_span_id, None);

    // The tree shows the client under the server.
    let server_line = format!("\n  POST /runs [server] {}", sent.server);
    let client_line = format!(
        "\n    chat model [client] {} ERROR \"upstream answered 503\"",
        sent.client
    );
    assert!(
        tree.starts_with(&format!("trace {} (2 spans)", sent.trace_id)),
        "{tree}"
    );
    assert!(tree.contains(&server_line), "{tree}");
    assert!(tree.contains(&client_line), "{tree}");
    assert!(tree.contains("http.response.status_code=200"), "{tree}");
}

#[tokio::test]
async fn a_trace_arrives_whole_over_http_protobuf() {
    a_trace_arrives_whole(Protocol::HttpBinary).await;
}

#[tokio::test]
async fn a_trace_arrives_whole_over_http_json() {
    a_trace_arrives_whole(Protocol::HttpJson).await;
}

/// A counter (two attribute sets), an up-down counter, a histogram and a
/// gauge; flushed once (cumulative), then again by the shutdown.
fn send_metrics(url: &str, protocol: Protocol) {
    let provider = meter_provider(url, protocol);
    let meter = provider.meter(SCOPE);
    let runs = meter
        .u64_counter("agwire.runs")
        .with_description("Runs accepted")
        .with_unit("{run}")
        .build();
    runs.add(2, &[KeyValue::new("outcome", "ok")]);
    runs.add(1, &[KeyValue::new("outcome", "error")]);
    runs.add(3, &[KeyValue::new("outcome", "ok")]);
    let active = meter
        .i64_up_down_counter("agwire.runs.active")
        .with_unit("{run}")
        .build();
    active.add(3, &[]);
    active.add(-1, &[]);
    let duration = meter
        .f64_histogram("agwire.run.duration")
        .with_description("How long a run took")
        .with_unit("s")
        .build();
    duration.record(0.5, &[KeyValue::new("agent", "echo")]);
    duration.record(1.75, &[KeyValue::new("agent", "echo")]);
    let fill = meter.f64_gauge("agwire.queue.fill").with_unit("1").build();
    fill.record(0.75, &[KeyValue::new("queue", "runs")]);
    provider.force_flush().unwrap();
    provider.shutdown().unwrap();
}

fn point<'a>(points: &'a [MetricPoint], name: &str, attr: Option<(&str, &str)>) -> &'a MetricPoint {
    points
        .iter()
        .rev()
        .find(|point| {
            point.name == name && attr.is_none_or(|(key, value)| point.attr_str(key) == Some(value))
        })
        .unwrap_or_else(|| panic!("no point {name} {attr:?} among {points:#?}"))
}

async fn metrics_arrive_whole(protocol: Protocol) {
    let receiver = Receiver::start().await;
    let url = receiver.metrics_url();
    tokio::task::spawn_blocking(move || send_metrics(&url, protocol))
        .await
        .unwrap();
    let names = [
        "agwire.runs",
        "agwire.runs.active",
        "agwire.run.duration",
        "agwire.queue.fill",
    ];
    let points = receiver
        .wait_metrics(BOUND, "the four metrics", |points| {
            names
                .iter()
                .all(|name| points.iter().any(|point| point.name == *name))
        })
        .await;

    let ok = point(&points, "agwire.runs", Some(("outcome", "ok")));
    assert_eq!(ok.kind, MetricKind::Sum { monotonic: true });
    assert_eq!(ok.value, 5.0);
    assert_eq!(ok.count, 0);
    assert_eq!(ok.unit, "{run}");
    assert_eq!(ok.description, "Runs accepted");
    assert_eq!(
        serde_json::Value::Object(ok.attributes.clone()),
        json!({"outcome": "ok"})
    );
    assert_eq!(ok.scope, SCOPE);
    assert_eq!(
        ok.resource.get("service.name"),
        Some(&json!("otlp-receiver-test"))
    );
    assert!(ok.time_unix_nano > 0);
    let error = point(&points, "agwire.runs", Some(("outcome", "error")));
    assert_eq!(error.value, 1.0);

    let active = point(&points, "agwire.runs.active", None);
    assert_eq!(active.kind, MetricKind::Sum { monotonic: false });
    assert_eq!(active.value, 2.0);
    assert!(active.attributes.is_empty());

    let duration = point(&points, "agwire.run.duration", Some(("agent", "echo")));
    assert_eq!(duration.kind, MetricKind::Histogram);
    assert_eq!(duration.unit, "s");
    assert_eq!(duration.description, "How long a run took");
    assert_eq!(duration.count, 2);
    assert_eq!(duration.value, 2.25);

    let fill = point(&points, "agwire.queue.fill", Some(("queue", "runs")));
    assert_eq!(fill.kind, MetricKind::Gauge);
    assert_eq!(fill.value, 0.75);
    assert_eq!(fill.unit, "1");
}

#[tokio::test]
async fn metrics_arrive_whole_over_http_protobuf() {
    metrics_arrive_whole(Protocol::HttpBinary).await;
}

#[tokio::test]
async fn metrics_arrive_whole_over_http_json() {
    metrics_arrive_whole(Protocol::HttpJson).await;
}

/// While failing, the exporter's flush reports the error and nothing is
/// kept. A 503 is retried (three times, by the exporter's default policy),
/// a 400 is not. A failed batch of spans is lost (not sent again once the
/// collector is back); a cumulative metric comes back whole with the next
/// collection.
#[tokio::test]
async fn a_failing_collector_fails_the_flush_and_keeps_nothing() {
    let receiver = Arc::new(Receiver::start().await);
    let shared = Arc::clone(&receiver);
    tokio::task::spawn_blocking(move || {
        let receiver = shared;
        let provider = tracer_provider(&receiver.traces_url(), Protocol::HttpBinary);
        let tracer = provider.tracer(SCOPE);

        receiver.set_failing(Some(503));
        tracer.start("lost while unavailable").end();
        let error = provider.force_flush().unwrap_err();
        assert!(error.to_string().contains("503"), "{error}");
        assert_eq!(receiver.requests(), 4, "the first attempt and 3 retries");

        receiver.set_failing(Some(400));
        tracer.start("lost while refused").end();
        let error = provider.force_flush().unwrap_err();
        assert!(error.to_string().contains("400"), "{error}");
        assert_eq!(receiver.requests(), 5, "a 400 is not retried");

        let meters = meter_provider(&receiver.metrics_url(), Protocol::HttpJson);
        let counter = meters
            .meter(SCOPE)
            .u64_counter("counted.during.outage")
            .build();
        counter.add(1, &[]);
        // The meter provider's error says no more than "Failed to flush".
        assert!(meters.force_flush().is_err());
        assert_eq!(receiver.requests(), 6);
        assert!(receiver.spans().is_empty());
        assert!(receiver.metrics().is_empty());

        receiver.set_failing(None);
        tracer.start("kept").end();
        provider.force_flush().unwrap();
        provider.shutdown().unwrap();
        counter.add(1, &[]);
        meters.force_flush().unwrap();
        meters.shutdown().unwrap();
    })
    .await
    .unwrap();
    let spans = receiver
        .wait_spans(BOUND, "the span after recovery", |spans| !spans.is_empty())
        .await;
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    assert_eq!(names, ["kept"]);
    let points = receiver
        .wait_metrics(BOUND, "the counter after recovery", |points| {
            !points.is_empty()
        })
        .await;
    assert_eq!(points[0].name, "counted.during.outage");
    assert_eq!(
        points[0].value, 2.0,
        "both adds, the one of the failed export too"
    );
}

async fn post(
    url: &str,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> (u16, String, String) {
    let mut request = reqwest::Client::new().post(url).body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, content_type, response.text().await.unwrap())
}

/// Only OTLP bodies are taken: another media type is 415, a body that does
/// not decode 400, both counted and nothing kept; an empty export is
/// answered in its own encoding.
#[tokio::test]
async fn other_bodies_are_refused() {
    let receiver = Receiver::start().await;
    let traces = receiver.traces_url();
    let metrics = receiver.metrics_url();

    let (status, _, why) = post(&traces, Some("text/plain"), "hello").await;
    assert_eq!(status, 415, "{why}");
    assert!(why.contains("text/plain"), "{why}");
    assert_eq!(post(&metrics, None, "{}").await.0, 415);
    assert_eq!(post(&traces, Some("application/protobuf"), "").await.0, 415);
    let gzipped = reqwest::Client::new()
        .post(&traces)
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(gzipped.status().as_u16(), 415);

    let (status, _, why) = post(&traces, Some("application/x-protobuf"), vec![0xff_u8; 8]).await;
    assert_eq!(status, 400, "{why}");
    assert!(why.contains("ExportTraceServiceRequest"), "{why}");
    assert_eq!(
        post(&metrics, Some("application/json"), "[1, 2").await.0,
        400
    );
    assert_eq!(
        post(
            &traces,
            Some("application/json"),
            r#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "not hex"}]}]}]}"#
        )
        .await
        .0,
        400
    );

    // Empty exports: 200, an empty response in the request's encoding
    // (media-type parameters and case do not matter).
    assert_eq!(
        post(&traces, Some("application/x-protobuf"), "").await,
        (200, "application/x-protobuf".into(), String::new())
    );
    assert_eq!(
        post(&metrics, Some("Application/JSON; charset=utf-8"), "{}").await,
        (200, "application/json".into(), "{}".into())
    );

    let client = reqwest::Client::new();
    assert_eq!(
        client.get(&traces).send().await.unwrap().status().as_u16(),
        405
    );
    let logs = format!("{}/v1/logs", receiver.endpoint());
    assert_eq!(post(&logs, Some("application/x-protobuf"), "").await.0, 404);

    assert_eq!(receiver.requests(), 9, "404 and 405 are no export requests");
    assert!(receiver.spans().is_empty());
    assert!(receiver.metrics().is_empty());
}

/// OTLP/JSON as the specification writes it and other SDKs send it:
/// 64-bit integers as strings, enums as numbers, ids in hex, bytes in
/// base64.
#[tokio::test]
async fn otlp_json_of_other_senders() {
    let receiver = Receiver::start().await;
    let traces = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "js-app"}}]},
        "scopeSpans": [{
            "scope": {"name": "js.tracer", "version": "1.0.0"},
            "spans": [{
                "traceId": "5b8efff798038103d269b633813fc60c",
                "spanId": "eee19b7ec3c1b174",
                "parentSpanId": "eee19b7ec3c1b173",
                "traceState": "vendor=x",
                "name": "GET /items",
                "kind": 3,
                "startTimeUnixNano": "1544712660000000000",
                "endTimeUnixNano": 1_544_712_661_000_000_000_u64,
                "attributes": [
                    {"key": "count", "value": {"intValue": "42"}},
                    {"key": "small", "value": {"intValue": 7}},
                    {"key": "ratio", "value": {"doubleValue": 1.5}},
                    {"key": "ok", "value": {"boolValue": false}},
                    {"key": "raw", "value": {"bytesValue": "AQL/"}},
                    {"key": "nested", "value": {"kvlistValue": {"values": [
                        {"key": "inner", "value": {"stringValue": "x"}}]}}},
                    {"key": "mixed", "value": {"arrayValue": {"values": [
                        {"intValue": "1"}, {"stringValue": "two"}]}}},
                    {"key": "empty", "value": {}}
                ],
                "droppedAttributesCount": 2,
                "events": [{"timeUnixNano": "1544712660500000000", "name": "ev"}],
                "links": [{"traceId": "00000000000000000000000000000001", "spanId": "0000000000000002"}],
                "status": {"code": 2, "message": "bad"},
                "unknownField": "ignored"
            }, {
                "traceId": "5b8efff798038103d269b633813fc60c",
                "spanId": "eee19b7ec3c1b173",
                "parentSpanId": "",
                "name": "root",
                "kind": 9
            }]
        }]
    }]});
    let (status, content_type, body) = post(
        &receiver.traces_url(),
        Some("application/json"),
        traces.to_string(),
    )
    .await;
    assert_eq!(
        (status, content_type.as_str(), body.as_str()),
        (200, "application/json", "{}")
    );
    let spans = receiver.spans();
    assert_eq!(spans.len(), 2);
    let span = &spans[0];
    assert_eq!(span.trace_id, "5b8efff798038103d269b633813fc60c");
    assert_eq!(span.span_id, "eee19b7ec3c1b174");
    assert_eq!(span.parent_span_id.as_deref(), Some("eee19b7ec3c1b173"));
    assert_eq!(span.trace_state, "vendor=x");
    assert_eq!(span.kind, SpanKind::Client);
    assert_eq!(span.start_unix_nano, 1_544_712_660_000_000_000);
    assert_eq!(span.end_unix_nano, 1_544_712_661_000_000_000);
    assert_eq!(
        serde_json::Value::Object(span.attributes.clone()),
        json!({
            "count": 42,
            "small": 7,
            "ratio": 1.5,
            "ok": false,
            "raw": "0102ff",
            "nested": {"inner": "x"},
            "mixed": [1, "two"],
            "empty": null,
        })
    );
    assert_eq!(span.dropped_attributes_count, 2);
    assert_eq!(span.events[0].name, "ev");
    assert_eq!(span.events[0].time_unix_nano, 1_544_712_660_500_000_000);
    assert_eq!(span.links[0].trace_id, "00000000000000000000000000000001");
    assert_eq!(span.links[0].span_id, "0000000000000002");
    assert_eq!(
        (span.status_code, span.status_message.as_str()),
        (StatusCode::Error, "bad")
    );
    assert_eq!(span.scope, "js.tracer");
    assert_eq!(span.resource.get("service.name"), Some(&json!("js-app")));
    let root = &spans[1];
    assert_eq!(root.parent_span_id, None, "an empty parentSpanId is none");
    assert_eq!(root.kind, SpanKind::Unspecified, "an unknown kind");
    assert_eq!(root.status_code, StatusCode::Unset);
    let tree = trace_tree(&spans, "5b8efff798038103d269b633813fc60c");
    assert!(tree.contains("\n  root [unspecified] eee19b7ec3c1b173\n    GET /items [client] eee19b7ec3c1b174 ERROR \"bad\""), "{tree}");

    let metrics = json!({"resourceMetrics": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "js-app"}}]},
        "scopeMetrics": [{
            "scope": {"name": "js.meter"},
            "metrics": [{
                "name": "requests",
                "unit": "{request}",
                "sum": {
                    "aggregationTemporality": 2,
                    "isMonotonic": true,
                    "dataPoints": [{"asInt": "12", "timeUnixNano": "1544712660300000000",
                        "attributes": [{"key": "route", "value": {"stringValue": "/items"}}]}]
                }
            }, {
                "name": "temperature",
                "gauge": {"dataPoints": [{"asDouble": 21.5, "timeUnixNano": "1"}]}
            }, {
                "name": "latency",
                "unit": "ms",
                "histogram": {
                    "aggregationTemporality": 1,
                    "dataPoints": [{"count": "3", "sum": 60.0, "bucketCounts": ["1", "2"],
                        "explicitBounds": [10.0], "timeUnixNano": "2"}]
                }
            }]
        }]
    }]});
    let (status, _, _) = post(
        &receiver.metrics_url(),
        Some("application/json"),
        metrics.to_string(),
    )
    .await;
    assert_eq!(status, 200);
    let points = receiver.metrics();
    assert_eq!(points.len(), 3, "{points:#?}");
    assert_eq!(points[0].name, "requests");
    assert_eq!(points[0].kind, MetricKind::Sum { monotonic: true });
    assert_eq!(points[0].value, 12.0);
    assert_eq!(points[0].attr_str("route"), Some("/items"));
    assert_eq!(points[0].time_unix_nano, 1_544_712_660_300_000_000);
    assert_eq!(points[0].scope, "js.meter");
    assert_eq!((points[1].kind, points[1].value), (MetricKind::Gauge, 21.5));
    assert_eq!(
        (points[2].kind, points[2].value, points[2].count),
        (MetricKind::Histogram, 60.0, 3)
    );
}

/// The receiver's base endpoint in `OTEL_EXPORTER_OTLP_ENDPOINT` (how a
/// child process is pointed at it), with the protocol and the service name
/// from the environment too: this test binary runs itself as the child
/// ([`child_exports_from_the_environment`]), which configures nothing in
/// code.
#[tokio::test]
async fn a_child_process_exports_by_the_environment() {
    let receiver = Receiver::start().await;
    for protocol in ["http/protobuf", "http/json"] {
        let child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "child_exports_from_the_environment",
                "--exact",
                "--nocapture",
            ])
            .env("AGWIRE_OTLP_CHILD", protocol)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
            .env("OTEL_SERVICE_NAME", "otlp-child")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            // Bounded: a child that hangs is killed (on drop) and fails.
            .kill_on_drop(true)
            .output();
        let child = tokio::time::timeout(Duration::from_secs(120), child)
            .await
            .unwrap_or_else(|_| panic!("the child ({protocol}) did not exit within 120 s"))
            .unwrap();
        assert!(
            child.status.success(),
            "the child ({protocol}) failed: {}\n{}{}",
            child.status,
            String::from_utf8_lossy(&child.stdout),
            String::from_utf8_lossy(&child.stderr)
        );
    }
    let spans = receiver
        .wait_spans(BOUND, "a span from each child", |spans| spans.len() >= 2)
        .await;
    for (span, protocol) in spans.iter().zip(["http/protobuf", "http/json"]) {
        assert_eq!(span.name, format!("child over {protocol}"));
        assert_eq!(
            span.resource.get("service.name"),
            Some(&json!("otlp-child"))
        );
    }
    let points = receiver
        .wait_metrics(BOUND, "a point from each child", |points| {
            ["http/protobuf", "http/json"].iter().all(|protocol| {
                points.iter().any(|point| {
                    point.name == "child.exports" && point.attr_str("protocol") == Some(protocol)
                })
            })
        })
        .await;
    assert!(points.iter().all(|point| point.value == 1.0));
}

/// The child of [`a_child_process_exports_by_the_environment`]; run on its
/// own (without `AGWIRE_OTLP_CHILD`) it does nothing.
#[test]
fn child_exports_from_the_environment() {
    let Ok(protocol) = std::env::var("AGWIRE_OTLP_CHILD") else {
        return;
    };
    let spans = SdkTracerProvider::builder()
        .with_batch_exporter(
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .build()
                .unwrap(),
        )
        .build();
    spans
        .tracer(SCOPE)
        .start(format!("child over {protocol}"))
        .end();
    spans.force_flush().unwrap();
    let meters = SdkMeterProvider::builder()
        .with_reader(
            PeriodicReader::builder(
                opentelemetry_otlp::MetricExporter::builder()
                    .with_http()
                    .build()
                    .unwrap(),
            )
            .build(),
        )
        .build();
    meters
        .meter(SCOPE)
        .u64_counter("child.exports")
        .build()
        .add(1, &[KeyValue::new("protocol", protocol)]);
    meters.force_flush().unwrap();
}

/// A wait that starts before the export wakes when it arrives: the sender
/// waits for the wait's first look (its `done` called once) before it
/// exports anything.
#[tokio::test]
async fn a_wait_wakes_when_an_export_arrives() {
    let receiver = Receiver::start().await;
    let url = receiver.traces_url();
    let (go, went) = std::sync::mpsc::channel::<()>();
    let send = tokio::task::spawn_blocking(move || {
        went.recv().unwrap();
        send_trace(&url, Protocol::HttpBinary)
    });
    let looks = std::sync::atomic::AtomicUsize::new(0);
    let spans = receiver
        .wait_spans(
            BOUND,
            "the three spans, exported after the wait began",
            |spans| {
                if looks.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    assert!(spans.is_empty());
                    go.send(()).unwrap();
                }
                spans.len() >= 3
            },
        )
        .await;
    let sent = send.await.unwrap();
    assert!(spans.iter().any(|span| span.span_id == sent.client));
    assert!(looks.into_inner() >= 2);
}

fn panic_text(error: tokio::task::JoinError) -> String {
    let payload = error.into_panic();
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| {
            payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
        })
        .unwrap_or_default()
}

/// A wait that times out panics with what it waited for and everything
/// received: each trace as a tree, each metric point on a line.
#[tokio::test]
async fn a_wait_that_times_out_shows_what_arrived() {
    let receiver = Arc::new(Receiver::start().await);
    let (traces, metrics) = (receiver.traces_url(), receiver.metrics_url());
    let sent = tokio::task::spawn_blocking(move || {
        send_metrics(&metrics, Protocol::HttpBinary);
        send_trace(&traces, Protocol::HttpBinary)
    })
    .await
    .unwrap();

    let waiting = Arc::clone(&receiver);
    let spans_wait = tokio::spawn(async move {
        waiting
            .wait_spans(Duration::from_millis(200), "a span called never", |spans| {
                spans.iter().any(|span| span.name == "never")
            })
            .await
    });
    let text = panic_text(spans_wait.await.unwrap_err());
    for needle in [
        "a span called never: not within 200ms",
        "3 spans received in 2 traces",
        &format!("trace {} (2 spans)", sent.trace_id),
        &format!(
            "\n  POST /runs [server] {} {{http.request.method=POST",
            sent.server
        ),
        &format!(
            "\n    chat model [client] {} ERROR \"upstream answered 503\"",
            sent.client
        ),
        &format!("link→{}/{}", sent.linked_trace, sent.linked),
        "events=[\"run.accepted\"]",
        &format!(
            "trace {} (1 spans)\n  linked.work [internal] {}",
            sent.linked_trace, sent.linked
        ),
        "service.name=otlp-receiver-test",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }

    let waiting = Arc::clone(&receiver);
    let metrics_wait = tokio::spawn(async move {
        waiting
            .wait_metrics(
                Duration::from_millis(200),
                "a metric called never",
                |points| points.iter().any(|point| point.name == "never"),
            )
            .await
    });
    let text = panic_text(metrics_wait.await.unwrap_err());
    for needle in [
        "a metric called never: not within 200ms",
        "agwire.runs [Sum { monotonic: true }] unit=\"{run}\" value=5 {outcome=ok}",
        "agwire.run.duration [Histogram] unit=\"s\" value=2.25 count=2 {agent=echo}",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
}
