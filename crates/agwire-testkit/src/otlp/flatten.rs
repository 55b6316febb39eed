//! OTLP messages flattened into [`Span`]s and [`MetricPoint`]s.

use super::*;

pub(super) fn flatten_spans(request: ExportTraceServiceRequest) -> Vec<Span> {
    let mut spans = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_attributes(resource_spans.resource.as_ref());
        for scope_spans in resource_spans.scope_spans {
            let scope = scope_name(scope_spans.scope.as_ref());
            for span in scope_spans.spans {
                let (status_code, status_message) = span.status.map_or_else(
                    || (StatusCode::Unset, String::new()),
                    |status| (StatusCode::from_otlp(status.code), status.message),
                );
                spans.push(Span {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex(&span.parent_span_id)),
                    trace_state: span.trace_state,
                    name: span.name,
                    kind: SpanKind::from_otlp(span.kind),
                    start_unix_nano: span.start_time_unix_nano,
                    end_unix_nano: span.end_time_unix_nano,
                    attributes: attributes(&span.attributes),
                    events: span
                        .events
                        .into_iter()
                        .map(|event| SpanEvent {
                            attributes: attributes(&event.attributes),
                            name: event.name,
                            time_unix_nano: event.time_unix_nano,
                        })
                        .collect(),
                    links: span
                        .links
                        .iter()
                        .map(|link| SpanLink {
                            trace_id: hex(&link.trace_id),
                            span_id: hex(&link.span_id),
                            attributes: attributes(&link.attributes),
                        })
                        .collect(),
                    status_code,
                    status_message,
                    resource: resource.clone(),
                    scope: scope.clone(),
                    dropped_attributes_count: span.dropped_attributes_count,
                });
            }
        }
    }
    spans
}

pub(super) fn flatten_metrics(request: ExportMetricsServiceRequest) -> Vec<MetricPoint> {
    let mut points = Vec::new();
    for resource_metrics in request.resource_metrics {
        let resource = resource_attributes(resource_metrics.resource.as_ref());
        for scope_metrics in resource_metrics.scope_metrics {
            let scope = scope_name(scope_metrics.scope.as_ref());
            for metric in scope_metrics.metrics {
                let point = |kind, attrs: &[KeyValue], value, count, time_unix_nano| MetricPoint {
                    name: metric.name.clone(),
                    description: metric.description.clone(),
                    unit: metric.unit.clone(),
                    kind,
                    attributes: attributes(attrs),
                    value,
                    count,
                    time_unix_nano,
                    resource: resource.clone(),
                    scope: scope.clone(),
                };
                match &metric.data {
                    Some(metric::Data::Sum(sum)) => {
                        let kind = MetricKind::Sum {
                            monotonic: sum.is_monotonic,
                        };
                        points.extend(sum.data_points.iter().map(|p| {
                            point(kind, &p.attributes, number(p.value), 0, p.time_unix_nano)
                        }));
                    }
                    Some(metric::Data::Gauge(gauge)) => {
                        points.extend(gauge.data_points.iter().map(|p| {
                            point(
                                MetricKind::Gauge,
                                &p.attributes,
                                number(p.value),
                                0,
                                p.time_unix_nano,
                            )
                        }));
                    }
                    Some(metric::Data::Histogram(histogram)) => {
                        points.extend(histogram.data_points.iter().map(|p| {
                            point(
                                MetricKind::Histogram,
                                &p.attributes,
                                p.sum.unwrap_or(f64::NAN),
                                p.count,
                                p.time_unix_nano,
                            )
                        }));
                    }
                    Some(metric::Data::ExponentialHistogram(histogram)) => {
                        points.extend(histogram.data_points.iter().map(|p| {
                            point(
                                MetricKind::ExponentialHistogram,
                                &p.attributes,
                                p.sum.unwrap_or(f64::NAN),
                                p.count,
                                p.time_unix_nano,
                            )
                        }));
                    }
                    Some(metric::Data::Summary(summary)) => {
                        points.extend(summary.data_points.iter().map(|p| {
                            point(
                                MetricKind::Summary,
                                &p.attributes,
                                p.sum,
                                p.count,
                                p.time_unix_nano,
                            )
                        }));
                    }
                    // A metric without data has no points to keep.
                    None => {}
                }
            }
        }
    }
    points
}

fn number(value: Option<number_data_point::Value>) -> f64 {
    match value {
        Some(number_data_point::Value::AsDouble(value)) => value,
        // Exact below 2^53: a test's counts are.
        Some(number_data_point::Value::AsInt(value)) => value as f64,
        None => f64::NAN,
    }
}

fn resource_attributes(resource: Option<&Resource>) -> Map<String, Value> {
    resource.map_or_else(Map::new, |resource| attributes(&resource.attributes))
}

fn scope_name(scope: Option<&InstrumentationScope>) -> String {
    scope.map(|scope| scope.name.clone()).unwrap_or_default()
}

/// OTLP key-values as a JSON object (a repeated key: the last one wins).
fn attributes(key_values: &[KeyValue]) -> Map<String, Value> {
    key_values
        .iter()
        .map(|kv| (kv.key.clone(), any_value_to_json(kv.value.as_ref())))
        .collect()
}

/// An OTLP `AnyValue` as JSON: a string as a string, an int as an (i64)
/// number, a double as a number (NaN and the infinities, which JSON has no
/// numbers for, as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`), a
/// bool as a bool, an array as an array, a key-value list as an object,
/// bytes as a lowercase hex string; no value as `null`.
pub fn any_value_to_json(value: Option<&AnyValue>) -> Value {
    let Some(value) = value.and_then(|value| value.value.as_ref()) else {
        return Value::Null;
    };
    match value {
        any_value::Value::StringValue(string) => Value::String(string.clone()),
        any_value::Value::BoolValue(bool) => Value::Bool(*bool),
        any_value::Value::IntValue(int) => Value::from(*int),
        any_value::Value::DoubleValue(double) => serde_json::Number::from_f64(*double).map_or_else(
            || {
                Value::String(
                    if double.is_nan() {
                        "NaN"
                    } else if *double > 0.0 {
                        "Infinity"
                    } else {
                        "-Infinity"
                    }
                    .into(),
                )
            },
            Value::Number,
        ),
        any_value::Value::ArrayValue(array) => Value::Array(
            array
                .values
                .iter()
                .map(|value| any_value_to_json(Some(value)))
                .collect(),
        ),
        any_value::Value::KvlistValue(list) => Value::Object(attributes(&list.values)),
        any_value::Value::BytesValue(bytes) => Value::String(hex(bytes)),
        // An index into a profile's string table: no string without it.
        any_value::Value::StringValueStrindex(index) => Value::from(*index),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}
