//! Choosing the wire format from an `Accept` header, exactly as the official
//! encoder (`@ag-ui/encoder`, a port of jshttp `negotiator`) chooses it.
//!
//! The rule that matters: protobuf is chosen whenever the header admits
//! `application/vnd.ag-ui.event+proto` with a positive quality — including
//! through `*/*` or `application/*`. The most specific matching range decides
//! (a specific `q=0` vetoes a wildcard), and the relative quality of
//! `text/event-stream` is never consulted. An absent or empty header means SSE.
//!
//! ```
//! use agwire_codec::negotiate::{Negotiator, WireFormat};
//!
//! let n = Negotiator::default();
//! assert_eq!(n.choose(None), WireFormat::Sse);
//! assert_eq!(n.choose(Some("text/event-stream")), WireFormat::Sse);
//! assert_eq!(n.choose(Some("*/*")), WireFormat::Protobuf);
//! assert_eq!(n.choose(Some("application/vnd.ag-ui.event+proto;q=0, */*")), WireFormat::Sse);
//! // curl sends `*/*`: a server may prefer SSE unless protobuf is asked for by name.
//! let curl_friendly = Negotiator::default().prefer_sse_for_wildcards(true);
//! assert_eq!(curl_friendly.choose(Some("*/*")), WireFormat::Sse);
//! assert_eq!(curl_friendly.choose(Some("application/vnd.ag-ui.event+proto")), WireFormat::Protobuf);
//! ```

/// The SSE media type, exactly as the official SDKs send it.
pub const SSE_CONTENT_TYPE: &str = "text/event-stream";

/// The protobuf media type. Sent with no parameters: the official client picks
/// its protobuf parser by exact string equality on `Content-Type`.
pub const PROTO_CONTENT_TYPE: &str = "application/vnd.ag-ui.event+proto";

/// A wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// `text/event-stream`.
    Sse,
    /// `application/vnd.ag-ui.event+proto`.
    Protobuf,
}

impl WireFormat {
    /// The exact `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            WireFormat::Sse => SSE_CONTENT_TYPE,
            WireFormat::Protobuf => PROTO_CONTENT_TYPE,
        }
    }

    /// The format of a response, by its `Content-Type`, as the official client
    /// reads it: exactly the protobuf media type selects protobuf, anything
    /// else SSE.
    pub fn of_response(content_type: Option<&str>) -> Self {
        if content_type == Some(PROTO_CONTENT_TYPE) {
            WireFormat::Protobuf
        } else {
            WireFormat::Sse
        }
    }
}

/// Chooses the response format for a request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Negotiator {
    prefer_sse_for_wildcards: bool,
    sse_only: bool,
}

impl Negotiator {
    /// The official negotiator's behaviour (protobuf available).
    pub fn new() -> Self {
        Self::default()
    }

    /// When set, protobuf is chosen only if the range that decides names its
    /// subtype (`application/vnd.ag-ui.event+proto`, with a positive q); a
    /// header that admits it only through a wildcard (`*/*`, `application/*`)
    /// gets SSE.
    ///
    /// Why: curl, `fetch` and many HTTP libraries send `*/*` by default, and a
    /// person reading a terminal can follow SSE but not length-prefixed
    /// protobuf — which is what the official encoder answers them. The 1.1
    /// spec says a producer *SHOULD* answer protobuf whenever `Accept` admits
    /// it, so this is an opt-in departure from a SHOULD. A client that wants
    /// protobuf names it (`@ag-ui/client`'s `HttpAgent` asks for
    /// `text/event-stream` only), and every client must be ready for SSE, so
    /// no conforming client is harmed.
    pub fn prefer_sse_for_wildcards(mut self, yes: bool) -> Self {
        self.prefer_sse_for_wildcards = yes;
        self
    }

    /// Declares that this server cannot produce protobuf: every request gets SSE.
    pub fn sse_only(mut self) -> Self {
        self.sse_only = true;
        self
    }

    /// The format to answer a request whose `Accept` header is `accept`
    /// (`None` when absent). A request with several `Accept` lines means their
    /// values joined with `", "` (RFC 9110 §5.3); join them before calling.
    pub fn choose(&self, accept: Option<&str>) -> WireFormat {
        if self.sse_only {
            return WireFormat::Sse;
        }
        let Some(accept) = accept.filter(|a| !a.is_empty()) else {
            return WireFormat::Sse;
        };
        match best_match(accept) {
            Some(best) if best.q > 0.0 => {
                // Specificity bit 2: the subtype was matched by name.
                if self.prefer_sse_for_wildcards && best.s & 2 == 0 {
                    WireFormat::Sse
                } else {
                    WireFormat::Protobuf
                }
            }
            _ => WireFormat::Sse,
        }
    }
}

/// One parsed range of an `Accept` header.
#[derive(Debug)]
struct Range {
    kind: String,
    subtype: String,
    params: Vec<(String, String)>,
    q: f64,
    index: usize,
}

/// How a range matches the protobuf type: specificity, quality, position.
#[derive(Debug, Clone, Copy)]
struct Priority {
    s: i32,
    q: f64,
    o: f64,
}

/// JavaScript's `\s`.
fn js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

fn js_trim(s: &str) -> &str {
    s.trim_matches(js_space)
}

/// Splits on `sep`, gluing pieces back while a quote is open.
fn split_quoted(s: &str, sep: char) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in s.split(sep) {
        match out.last_mut() {
            Some(last) if last.matches('"').count() % 2 == 1 => {
                last.push(sep);
                last.push_str(piece);
            }
            _ => out.push(piece.to_owned()),
        }
    }
    out
}

/// `^\s*([^\s/;]+)\/([^;\s]+)\s*(?:;(.*))?$` on one trimmed range.
fn parse_range(s: &str, index: usize) -> Option<Range> {
    let s = s.trim_start_matches(js_space);
    let slash = s
        .find(['/', ';'].as_slice())
        .filter(|&i| s.as_bytes()[i] == b'/')?;
    let kind = &s[..slash];
    if kind.is_empty() || kind.chars().any(js_space) {
        return None;
    }
    let rest = &s[slash + 1..];
    let sub_end = rest
        .find(|c: char| c == ';' || js_space(c))
        .unwrap_or(rest.len());
    let subtype = &rest[..sub_end];
    if subtype.is_empty() {
        return None;
    }
    let after = rest[sub_end..].trim_start_matches(js_space);
    let params_text = match after.strip_prefix(';') {
        Some(params) => {
            // `.` does not match a line terminator, and `$` is the end of input.
            if params.contains(['\n', '\r', '\u{2028}', '\u{2029}']) {
                return None;
            }
            params
        }
        None if after.is_empty() => "",
        None => return None,
    };
    let mut range = Range {
        kind: kind.to_owned(),
        subtype: subtype.to_owned(),
        params: Vec::new(),
        q: 1.0,
        index,
    };
    if !params_text.is_empty() {
        for param in split_quoted(params_text, ';') {
            let param = js_trim(&param);
            let (key, value) = param.split_once('=').unwrap_or((param, ""));
            let key = key.to_lowercase();
            let value = if value.starts_with('"') && value.ends_with('"') && !value.is_empty() {
                value
                    .get(1..value.len().saturating_sub(1))
                    .unwrap_or_default()
            } else {
                value
            };
            if key == "q" {
                range.q = js_parse_float(value);
                break;
            }
            // The negotiator stores parameters in an object: a repeated key
            // keeps its last value.
            match range.params.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => value.clone_into(&mut slot.1),
                None => range.params.push((key, value.to_owned())),
            }
        }
    }
    Some(range)
}

/// JavaScript's `parseFloat`: the longest numeric prefix after leading
/// whitespace, `NaN` when there is none.
fn js_parse_float(s: &str) -> f64 {
    let s = s.trim_start_matches(js_space);
    let bytes = s.as_bytes();
    let mut end = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    if s[end..].starts_with("Infinity") {
        return if s.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    let digits = |mut i: usize| {
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let int_end = digits(end);
    let mut last = int_end;
    let mut any = int_end > end;
    if bytes.get(last) == Some(&b'.') {
        let frac_end = digits(last + 1);
        if frac_end > last + 1 || any {
            any |= frac_end > last + 1;
            last = frac_end;
        }
    }
    if !any {
        return f64::NAN;
    }
    if matches!(bytes.get(last), Some(b'e' | b'E')) {
        let mut exp = last + 1;
        if matches!(bytes.get(exp), Some(b'+' | b'-')) {
            exp += 1;
        }
        let exp_end = digits(exp);
        if exp_end > exp {
            last = exp_end;
        }
    }
    s[..last].parse().unwrap_or(f64::NAN)
}

/// JavaScript's `a || b` on numbers: `b` when `a` is 0 or NaN.
fn js_or(a: f64, b: f64) -> f64 {
    if a == 0.0 || a.is_nan() { b } else { a }
}

/// The best range for the protobuf type, by the negotiator's rules.
fn best_match(accept: &str) -> Option<Priority> {
    let mut best = Priority {
        s: 0,
        q: 0.0,
        o: -1.0,
    };
    let mut matched = false;
    for (i, raw) in split_quoted(accept, ',').iter().enumerate() {
        let Some(range) = parse_range(js_trim(raw), i) else {
            continue;
        };
        let Some(spec) = specify(&range) else {
            continue;
        };
        let order = js_or(
            js_or(f64::from(best.s - spec.s), best.q - spec.q),
            best.o - spec.o,
        );
        if order < 0.0 {
            best = spec;
            matched = true;
        }
    }
    matched.then_some(best)
}

/// How specifically `range` matches `application/vnd.ag-ui.event+proto`.
fn specify(range: &Range) -> Option<Priority> {
    let mut s = 0;
    if range.kind.to_lowercase() == "application" {
        s |= 4;
    } else if range.kind != "*" {
        return None;
    }
    if range.subtype.to_lowercase() == "vnd.ag-ui.event+proto" {
        s |= 2;
    } else if range.subtype != "*" {
        return None;
    }
    if !range.params.is_empty() {
        // The provided type has no parameters, so only `*` or empty values match.
        if range.params.iter().all(|(_, v)| v == "*" || v.is_empty()) {
            s |= 1;
        } else {
            return None;
        }
    }
    #[allow(clippy::cast_precision_loss)]
    Some(Priority {
        s,
        q: range.q,
        o: range.index as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choose(accept: &str) -> WireFormat {
        Negotiator::default().choose(Some(accept))
    }

    #[test]
    fn digest_table() {
        use WireFormat::{Protobuf as P, Sse as S};
        for (accept, want) in [
            ("", S),
            ("text/event-stream", S),
            ("*/*", P),
            ("application/*", P),
            ("text/event-stream, application/vnd.ag-ui.event+proto", P),
            ("application/vnd.ag-ui.event+proto;q=0, */*", S),
            ("application/vnd.ag-ui.event+proto", P),
            ("application/vnd.ag-ui.event+proto;q=0.001", P),
            ("application/json", S),
            ("*/*;q=0, application/vnd.ag-ui.event+proto", P),
            ("application/vnd.ag-ui.event+proto;charset=utf-8", S),
            ("APPLICATION/VND.AG-UI.EVENT+PROTO", P),
            ("application/*;q=0, */*", S),
            ("text/event-stream;q=1, */*;q=0.1", P),
            // A repeated parameter keeps its last value.
            ("application/vnd.ag-ui.event+proto;a=1;a=*", P),
            ("application/vnd.ag-ui.event+proto;a=*;a=1", S),
            // A quoted comma does not split the header (split there, the
            // second half would admit protobuf: `b="` unquotes to empty).
            ("text/html;a=\"x, application/vnd.ag-ui.event+proto;b=\"", S),
            ("application/vnd.ag-ui.event+proto;b=\"", P),
        ] {
            assert_eq!(choose(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn parse_float_is_javascripts() {
        assert_eq!(js_parse_float("0.5"), 0.5);
        assert_eq!(js_parse_float(" 1abc"), 1.0);
        assert_eq!(js_parse_float(".5"), 0.5);
        assert_eq!(js_parse_float("5."), 5.0);
        assert_eq!(js_parse_float("1e-3"), 0.001);
        assert_eq!(js_parse_float("1e"), 1.0);
        assert_eq!(js_parse_float("-0"), 0.0);
        assert!(js_parse_float("").is_nan());
        assert!(js_parse_float(".").is_nan());
        assert!(js_parse_float("abc").is_nan());
        assert_eq!(js_parse_float("Infinity"), f64::INFINITY);
    }

    #[test]
    fn wildcard_preference_is_opt_in() {
        let n = Negotiator::default().prefer_sse_for_wildcards(true);
        assert_eq!(n.choose(Some("*/*")), WireFormat::Sse);
        assert_eq!(n.choose(Some("application/*")), WireFormat::Sse);
        assert_eq!(
            n.choose(Some("text/event-stream, application/vnd.ag-ui.event+proto")),
            WireFormat::Protobuf
        );
        assert_eq!(
            Negotiator::default().sse_only().choose(Some("*/*")),
            WireFormat::Sse
        );
    }
}
