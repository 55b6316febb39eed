//! What arrived, as text for failure messages: trace trees and dumps.

use super::*;

/// The spans of trace `trace_id` among `spans` as an indented tree, a line a
/// span: name, kind, span id, an error status, and the attributes in short.
/// Children are under their parent in start order; a span whose parent is
/// not among `spans` is a root, marked with the missing parent's id.
///
/// ```text
/// trace 4bf92f3577b34da6a3ce929d0e0e4736 (2 spans)
///   POST /runs [server] 00f067aa0ba902b7 {http.request.method=POST, http.response.status_code=200}
///     chat gpt-4o [client] 53995c3f42cd8ad8 ERROR "upstream 503" {gen_ai.system=openai}
/// ```
pub fn trace_tree(spans: &[Span], trace_id: &str) -> String {
    let mut in_trace: Vec<&Span> = spans
        .iter()
        .filter(|span| span.trace_id == trace_id)
        .collect();
    in_trace.sort_by_key(|span| span.start_unix_nano);
    let mut out = format!("trace {trace_id} ({} spans)\n", in_trace.len());
    let ids: BTreeSet<&str> = in_trace.iter().map(|span| span.span_id.as_str()).collect();
    let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (index, span) in in_trace.iter().enumerate() {
        match span.parent_span_id.as_deref() {
            Some(parent) if ids.contains(parent) && parent != span.span_id => {
                children.entry(parent).or_default().push(index);
            }
            _ => roots.push(index),
        }
    }
    let mut shown = vec![false; in_trace.len()];
    // Depth first, by an explicit stack: (index, depth), last pushed first.
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&index| (index, 1)).collect();
    loop {
        while let Some((index, depth)) = stack.pop() {
            if std::mem::replace(&mut shown[index], true) {
                continue;
            }
            let span = in_trace[index];
            out.push_str(&"  ".repeat(depth));
            out.push_str(&span_line(span));
            if let Some(parent) = &span.parent_span_id
                && !ids.contains(parent.as_str())
            {
                let _ = write!(out, " (parent {parent} not received)");
            }
            out.push('\n');
            if let Some(kids) = children.get(span.span_id.as_str()) {
                stack.extend(kids.iter().rev().map(|&kid| (kid, depth + 1)));
            }
        }
        // Spans in a parent cycle reach no root: shown, not lost.
        match shown.iter().position(|shown| !shown) {
            Some(index) => {
                out.push_str("  (in a parent cycle:)\n");
                stack.push((index, 1));
            }
            None => break,
        }
    }
    out
}

fn span_line(span: &Span) -> String {
    let mut line = format!("{} [{}] {}", span.name, span.kind.label(), span.span_id);
    match span.status_code {
        StatusCode::Unset => {}
        StatusCode::Ok => line.push_str(" OK"),
        StatusCode::Error => {
            let _ = write!(line, " ERROR {:?}", span.status_message);
        }
    }
    if !span.attributes.is_empty() {
        let _ = write!(line, " {}", short_attributes(&span.attributes));
    }
    if !span.events.is_empty() {
        let names: Vec<&str> = span
            .events
            .iter()
            .map(|event| event.name.as_str())
            .collect();
        let _ = write!(line, " events={names:?}");
    }
    for link in &span.links {
        let _ = write!(line, " link→{}/{}", link.trace_id, link.span_id);
    }
    line
}

/// `{key=value, …}`: long values cut, at most twelve keys.
fn short_attributes(attributes: &Map<String, Value>) -> String {
    const KEYS: usize = 12;
    const CHARS: usize = 48;
    let mut parts: Vec<String> = attributes
        .iter()
        .take(KEYS)
        .map(|(key, value)| {
            let value = match value {
                Value::String(string) => string.clone(),
                other => other.to_string(),
            };
            if value.chars().count() > CHARS {
                let cut: String = value.chars().take(CHARS).collect();
                format!("{key}={cut}…")
            } else {
                format!("{key}={value}")
            }
        })
        .collect();
    if attributes.len() > KEYS {
        parts.push(format!("…{} more", attributes.len() - KEYS));
    }
    format!("{{{}}}", parts.join(", "))
}

pub(super) fn dump_spans(spans: &[Span]) -> String {
    if spans.is_empty() {
        return "no spans received".into();
    }
    let mut traces: Vec<&str> = Vec::new();
    for span in spans {
        if !traces.contains(&span.trace_id.as_str()) {
            traces.push(&span.trace_id);
        }
    }
    let mut out = format!(
        "{} spans received in {} traces:\n",
        spans.len(),
        traces.len()
    );
    for trace_id in traces {
        out.push_str(&trace_tree(spans, trace_id));
    }
    if let Some(first) = spans.first() {
        let _ = write!(
            out,
            "resource of the first: {}",
            short_attributes(&first.resource)
        );
    }
    out
}

pub(super) fn dump_metrics(points: &[MetricPoint]) -> String {
    if points.is_empty() {
        return "no metric points received".into();
    }
    let mut out = format!("{} metric points received:\n", points.len());
    for point in points {
        let _ = write!(
            out,
            "  {} [{:?}] unit={:?} value={}",
            point.name, point.kind, point.unit, point.value
        );
        if matches!(
            point.kind,
            MetricKind::Histogram | MetricKind::ExponentialHistogram | MetricKind::Summary
        ) {
            let _ = write!(out, " count={}", point.count);
        }
        let _ = writeln!(
            out,
            " {} scope={:?}",
            short_attributes(&point.attributes),
            point.scope
        );
    }
    out
}
