//! The whole API against extreme input, as a property: whatever one value
//! of a valid request is replaced by — far dates, huge, negative and
//! non-finite numbers, 64 KiB strings, empty strings, unicode (RTL,
//! combining marks, emoji, lone surrogate escapes), the wrong JSON type,
//! percent-encoded junk in a path, a value left out — the answer is never
//! a 5xx, no answer breaks off, and every 4xx is JSON
//! `{"detail": "<string>"}`. The runs it gets accepted all end, none with a
//! panic or an internal error.
//!
//! What is sent comes from the service's own `/openapi.json` (the routes it
//! serves, generated from the handlers): every operation, every path, query
//! and header parameter, and every field of its JSON body — the body schema
//! walked through its `$ref`s, nested objects and arrays, and the
//! alternatives of a keyed enum (`{"cron"}` or `{"every_seconds"}`) — plus
//! every value of the operation's valid baseline request (a message's
//! content parts, which the schema leaves open, and the query of an
//! attachment's signed URL). Each operation's baseline is checked to
//! succeed first, so a probe changes exactly one thing about a request the
//! service accepts. A query value is also sent with the other optional
//! ones left out (where their defaults meet it: `from` without `to`), and
//! where a run's stream resumes (`after`, `Last-Event-ID`) is also tried on
//! a run that is live, whose next events a follower then meets.
//!
//! The core set — every parameter and field with every core value — is
//! always sent. Beyond it, a seeded generator picks random extreme values
//! (dates of any year and offset, integers near every power of two,
//! unicode, cron expressions, zones) for one to three values of a request
//! at a time: `AGWIRE_PROPERTY_SEED=<n>` replays a run's choices (the seed
//! is printed), `AGWIRE_PROPERTY_RANDOM=<n>` sets how many such requests
//! (default [`RANDOM_PROBES`]).
//!
//! NUL characters (`\u0000` in JSON, `%00` in paths and queries: a 422 in
//! a body, a 400 in a URL, on every store) are among the values unless
//! `AGWIRE_PROPERTY_NUL=0` ([`nul_enabled`]), the switch that leaves them
//! out.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    reason = "a test suite: helpers outside #[test] fns fail loudly, and report what they sent"
)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agwire_service::Config;
use agwire_service::auth::Auth;
use agwire_service::brain::llm::LlmBrain;
use agwire_service::brain::{Brain, RunSetup};
use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// Seeded random requests beyond the core set, unless
/// `AGWIRE_PROPERTY_RANDOM` says otherwise.
const RANDOM_PROBES: usize = 2000;
/// Requests in flight at once.
const CONCURRENCY: usize = 8;
/// How long one answer may take, its body (a run's stream) included.
const ANSWER_BOUND: Duration = Duration::from_secs(60);
/// Failures printed in full (the rest are counted).
const PRINTED_FAILURES: usize = 40;

/// A tiny PNG (the service judges images by their bytes).
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR property test image";

/// Whether NUL characters are among the values sent (unless
/// `AGWIRE_PROPERTY_NUL=0`).
fn nul_enabled() -> bool {
    std::env::var("AGWIRE_PROPERTY_NUL").as_deref() != Ok("0")
}

// --- the values --------------------------------------------------------

/// A value in a URL (path segment, query value) or a header.
#[derive(Debug, Clone)]
enum Text {
    /// Percent-encoded where it goes.
    Plain(String),
    /// Put in the URL as it is: percent-encoded junk, bytes that are not
    /// UTF-8 once decoded.
    Encoded(String),
}

/// A value in a JSON body.
#[derive(Debug, Clone)]
enum Json {
    Value(Value),
    /// JSON text a `serde_json::Value` cannot hold (a lone surrogate
    /// escape, a number beyond f64), spliced into the body as it is.
    Raw(String),
}

/// A value: text for parameters, JSON for body fields (a string is both).
#[derive(Debug, Clone)]
enum Extreme {
    Text(Text),
    Json(Json),
    /// A whole request body as bytes (uploads).
    Bytes(&'static str, Vec<u8>),
    /// Left out: the parameter, header or field is not sent.
    Absent,
}

impl Extreme {
    fn string(text: impl Into<String>) -> Self {
        Self::Text(Text::Plain(text.into()))
    }

    /// The value as a parameter's text, if it has one.
    fn as_text(&self) -> Option<Text> {
        match self {
            Self::Text(text) => Some(text.clone()),
            Self::Json(Json::Value(Value::String(s))) => Some(Text::Plain(s.clone())),
            Self::Json(Json::Value(v @ Value::Number(_))) => Some(Text::Plain(v.to_string())),
            Self::Json(Json::Raw(raw)) if !raw.starts_with('"') => Some(Text::Plain(raw.clone())),
            _ => None,
        }
    }

    /// The value as a JSON body value, if it is one.
    fn as_json(&self) -> Option<Json> {
        match self {
            Self::Text(Text::Plain(s)) => Some(Json::Value(Value::String(s.clone()))),
            Self::Text(Text::Encoded(_)) | Self::Bytes(..) | Self::Absent => None,
            Self::Json(json) => Some(json.clone()),
        }
    }
}

/// Strings every parameter and every field gets.
fn core_strings() -> Vec<String> {
    let mut strings: Vec<String> = [
        // Dates at and past the ends of every date type's range.
        "9999-12-31T23:59:59Z",
        "9999-12-30T00:00:00Z",
        "-009999-01-01T00:00:00Z",
        "0000-01-01",
        "0000-01-01T00:00:00Z",
        "+99999-01-01",
        "+99999-01-01T00:00:00Z",
        "2026-03-16T09:12:33+25:59",
        "9999-12-31T23:59:59-25:59",
        "-009999-01-01T00:00:00+25:59",
        "9999-12-31",
        "2026-02-30",
        "2026-03-16T24:00:00Z",
        // Numbers at and past the ends of every integer type, as text.
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "9007199254740993",
        "1e308",
        "-1",
        "0",
        "-0",
        "NaN",
        "inf",
        // Empty, blank, unicode.
        "",
        " ",
        "\u{202e}evil\u{202c}",
        "e\u{301}\u{302}\u{303}\u{304}\u{305}",
        "👩\u{200d}👩\u{200d}👧\u{200d}👦🏳\u{fe0f}\u{200d}🌈",
        "\u{feff}",
        "\u{fffd}",
        "日本語",
        "..",
        "../../etc/passwd",
        "\\",
        "\"",
        "%s%n",
    ]
    .map(String::from)
    .to_vec();
    strings.push("a".repeat(LONG));
    if nul_enabled() {
        strings.push("a\u{0}b".into());
    }
    strings
}

/// A long string: 64 KiB.
const LONG: usize = 64 * 1024;
/// A long string in a URL: a client sends at most 65 534 bytes of one (the
/// `http` crate's limit), so the longest that fits, well past the
/// server's 32 KiB of headers.
const LONG_IN_URL: usize = 60_000;

/// [`core_strings`] as they fit in a URL.
fn core_url_strings() -> Vec<String> {
    core_strings()
        .into_iter()
        .map(|s| {
            if s.len() == LONG {
                "a".repeat(LONG_IN_URL)
            } else {
                s
            }
        })
        .collect()
}

/// JSON values every body field gets, beyond [`core_strings`]: numbers
/// past every integer type, floats, every other type in the wrong place.
fn core_json() -> Vec<Json> {
    let mut nested = json!(1);
    for _ in 0..100 {
        nested = json!([nested]);
    }
    let mut values: Vec<Json> = [
        json!(i64::MAX),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(9_007_199_254_740_993_u64),
        json!(1e308),
        json!(-1e308),
        json!(5e-324),
        json!(-1),
        json!(0),
        json!(0.5),
        json!(true),
        Value::Null,
        json!([]),
        json!({}),
        json!([{}]),
        json!({"": null}),
        nested,
    ]
    .into_iter()
    .map(Json::Value)
    .collect();
    for raw in [
        "1e400",
        "-1e400",
        "18446744073709551616",
        "-9223372036854775809",
        "\"\\ud800\"",
        "\"a\\udfff\\ud800b\"",
        "\"\\ud83d\"",
    ] {
        values.push(Json::Raw(raw.into()));
    }
    if nul_enabled() {
        values.push(Json::Raw("\"\\u0000\"".into()));
    }
    values
}

/// Junk a URL carries as it is: escapes that are not escapes, bytes that
/// are not UTF-8, dot segments.
fn core_encoded() -> Vec<String> {
    let mut junk: Vec<String> = [
        "%",
        "%zz",
        "%ff%fe",
        "%ED%A0%80",
        "%C0%AF",
        "%2e%2e",
        "a%2Fb",
        "%E2%80%AE",
        "%25",
    ]
    .map(String::from)
    .to_vec();
    if nul_enabled() {
        junk.push("%00".into());
    }
    junk
}

/// Whole bodies an upload gets.
fn core_uploads() -> Vec<Extreme> {
    let mut junk = vec![0u8; 64 * 1024];
    for (i, byte) in junk.iter_mut().enumerate() {
        *byte = u8::try_from(i % 251).unwrap();
    }
    vec![
        Extreme::Bytes("image/png", Vec::new()),
        Extreme::Bytes("image/png", PNG[..8].to_vec()),
        Extreme::Bytes("image/png", junk),
        Extreme::Bytes("multipart/form-data; boundary=x", b"--x\r\n\r\n".to_vec()),
        Extreme::Bytes(
            "multipart/form-data; boundary=x",
            b"--x\r\ncontent-disposition: form-data; name=\"other\"\r\n\r\nv\r\n--x--\r\n".to_vec(),
        ),
        Extreme::Bytes("multipart/form-data", PNG.to_vec()),
        Extreme::Bytes("application/json", b"{}".to_vec()),
    ]
}

/// Every core value for a slot of this kind.
fn core_values(slot: &Slot) -> Vec<Extreme> {
    match slot {
        Slot::Upload => core_uploads(),
        Slot::Body(..) => {
            let mut values: Vec<Extreme> = core_strings()
                .into_iter()
                .map(|s| Extreme::Json(Json::Value(Value::String(s))))
                .collect();
            values.extend(core_json().into_iter().map(Extreme::Json));
            if !slot.is_root() {
                values.push(Extreme::Absent);
            }
            if slot.is_root() {
                // Bodies that are not JSON at all, or not an object.
                for raw in ["", "{", "[", "{\"a\":1,\"a\":2}", "\u{feff}{}"] {
                    values.push(Extreme::Json(Json::Raw(raw.into())));
                }
                values.push(Extreme::Json(Json::Raw("[".repeat(100_000))));
            }
            values
        }
        Slot::Header(_) => {
            let mut values: Vec<Extreme> =
                core_strings().into_iter().map(Extreme::string).collect();
            values.push(Extreme::Absent);
            values
        }
        Slot::Path(_) | Slot::Query(_) | Slot::UrlParam(..) => {
            let mut values: Vec<Extreme> = core_url_strings()
                .into_iter()
                .map(Extreme::string)
                .collect();
            if !matches!(slot, Slot::Path(_)) {
                values.push(Extreme::Absent);
            }
            values.extend(
                core_encoded()
                    .into_iter()
                    .map(|e| Extreme::Text(Text::Encoded(e))),
            );
            values
        }
    }
}

// --- random values -----------------------------------------------------

/// Zone names, real and not.
const ZONES: [&str; 12] = [
    "UTC",
    "utc",
    "Etc/GMT-14",
    "Etc/GMT+12",
    "Pacific/Kiritimati",
    "Pacific/Pago_Pago",
    "Antarctica/Troll",
    "Australia/Lord_Howe",
    "America/St_Johns",
    "Asia/Kathmandu",
    "America/Sao_Paulo",
    "Europe/Dublin",
];

fn random_date(rng: &mut StdRng) -> String {
    let year: i64 = match rng.random_range(0..4) {
        0 => rng.random_range(-9999..=9999),
        1 => *[
            -10000_i64, 10000, 9999, -9999, 0, 1, 1969, 1970, 2038, 2262, 1677,
        ]
        .choose(rng)
        .unwrap(),
        _ => rng.random_range(-999_999..=999_999),
    };
    let year = if (0..=9999).contains(&year) && rng.random_bool(0.8) {
        format!("{year:04}")
    } else {
        format!("{}{:06}", if year < 0 { '-' } else { '+' }, year.abs())
    };
    let (month, day) = (rng.random_range(0..=13), rng.random_range(0..=32));
    if rng.random_bool(0.2) {
        return format!("{year}-{month:02}-{day:02}");
    }
    let (h, m, s) = (
        rng.random_range(0..=25),
        rng.random_range(0..=61),
        rng.random_range(0..=61),
    );
    let fraction = if rng.random_bool(0.3) {
        let digits = rng.random_range(1..=12);
        let mut f = String::from(".");
        for _ in 0..digits {
            f.push(char::from(b'0' + rng.random_range(0..10_u8)));
        }
        f
    } else {
        String::new()
    };
    let offset = match rng.random_range(0..4) {
        0 => "Z".to_owned(),
        1 => String::new(),
        _ => format!(
            "{}{:02}:{:02}",
            if rng.random_bool(0.5) { '+' } else { '-' },
            rng.random_range(0..=99),
            rng.random_range(0..=99)
        ),
    };
    format!("{year}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}{fraction}{offset}")
}

/// An integer near a power of two, or any.
fn random_integer(rng: &mut StdRng) -> i128 {
    if rng.random_bool(0.2) {
        return i128::from(rng.random::<i64>());
    }
    let power = 1_i128 << rng.random_range(0..=64);
    let near = power + rng.random_range(-2..=2);
    if rng.random_bool(0.5) { near } else { -near }
}

fn random_unicode(rng: &mut StdRng) -> String {
    let len = rng.random_range(0..40);
    (0..len)
        .filter_map(|_| {
            let c = match rng.random_range(0..4) {
                0 => rng.random_range(0x20..0x7f),
                1 => rng.random_range(0x300..0x370), // combining marks
                2 => rng.random_range(0x590..0x700), // Hebrew, Arabic (RTL)
                _ => rng.random_range(0x1..0x11_0000),
            };
            char::from_u32(c).filter(|c| *c != '\0' || nul_enabled())
        })
        .collect()
}

fn random_cron(rng: &mut StdRng) -> String {
    let field = |rng: &mut StdRng| -> String {
        let n = |rng: &mut StdRng| {
            if rng.random_bool(0.2) {
                random_integer(rng).unsigned_abs().to_string()
            } else {
                rng.random_range(0..=61_u32).to_string()
            }
        };
        match rng.random_range(0..6) {
            0 => "*".into(),
            1 => n(rng),
            2 => format!("{}-{}", n(rng), n(rng)),
            3 => format!("*/{}", n(rng)),
            4 => format!("{}-{}/{}", n(rng), n(rng), n(rng)),
            _ => format!("{},{}", n(rng), n(rng)),
        }
    };
    if rng.random_bool(0.1) {
        return (*[
            "@yearly", "@monthly", "@weekly", "@daily", "@hourly", "@reboot", "@every",
        ]
        .choose(rng)
        .unwrap())
        .to_owned();
    }
    let fields = if rng.random_bool(0.9) {
        5
    } else {
        rng.random_range(0..8)
    };
    (0..fields)
        .map(|_| field(rng))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A random extreme value for `slot`: from the core set, or generated.
fn random_value(slot: &Slot, rng: &mut StdRng) -> Extreme {
    if !matches!(slot, Slot::Path(_) | Slot::Upload) && rng.random_bool(0.1) {
        return Extreme::Absent;
    }
    if matches!(slot, Slot::Upload) || rng.random_bool(0.25) {
        return core_values(slot).choose(rng).unwrap().clone();
    }
    let text = match rng.random_range(0..6) {
        0 | 1 => random_date(rng),
        2 => random_integer(rng).to_string(),
        3 => random_unicode(rng),
        4 => random_cron(rng),
        _ => (*ZONES.choose(rng).unwrap()).to_owned(),
    };
    match slot {
        Slot::Body(..) if rng.random_bool(0.3) => {
            let n = random_integer(rng);
            let value = match (i64::try_from(n), u64::try_from(n)) {
                (Ok(n), _) => json!(n),
                (_, Ok(n)) => json!(n),
                _ => return Extreme::Json(Json::Raw(n.to_string())),
            };
            if rng.random_bool(0.2) {
                Extreme::Json(Json::Value(json!(
                    f64::from_bits(rng.random::<u64>()).clamp(-f64::MAX, f64::MAX)
                )))
            } else {
                Extreme::Json(Json::Value(value))
            }
        }
        Slot::Path(_) | Slot::Query(_) | Slot::UrlParam(..) if rng.random_bool(0.1) => {
            Extreme::Text(Text::Encoded(format!(
                "%{:02x}%{:02X}",
                rng.random::<u8>(),
                rng.random::<u8>()
            )))
        }
        _ => Extreme::string(text),
    }
}

// --- the document ------------------------------------------------------

/// One step into a JSON body.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Key(String),
    Index(usize),
}

/// Where a probe puts its value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Path(String),
    Query(String),
    Header(String),
    /// A field of the JSON body (the whole body when empty); `exclusive`
    /// when the field is one alternative of a keyed enum, whose object
    /// then holds it alone.
    Body(Vec<Step>, bool),
    /// A query parameter of a URL a body field holds (an attachment's
    /// `exp` and `sig`).
    UrlParam(Vec<Step>, String),
    /// The whole body of an upload.
    Upload,
}

impl Slot {
    fn is_root(&self) -> bool {
        matches!(self, Self::Body(path, _) if path.is_empty())
    }
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Path(name) => write!(f, "path {name}"),
            Self::Query(name) => write!(f, "query {name}"),
            Self::Header(name) => write!(f, "header {name}"),
            Self::Upload => write!(f, "upload body"),
            Self::Body(path, _) => write!(f, "body {}", pointer(path)),
            Self::UrlParam(path, name) => write!(f, "body {} ?{name}", pointer(path)),
        }
    }
}

/// `/a/0/b`.
fn pointer(path: &[Step]) -> String {
    let steps: Vec<String> = path
        .iter()
        .map(|s| match s {
            Step::Key(k) => k.clone(),
            Step::Index(i) => i.to_string(),
        })
        .collect();
    format!("/{}", steps.join("/"))
}

/// An operation of the document.
#[derive(Debug, Clone)]
struct Operation {
    id: String,
    method: reqwest::Method,
    path: String,
    slots: Vec<Slot>,
    /// Its query parameters that must be sent.
    required: BTreeSet<String>,
}

/// `#/components/schemas/...`, resolved.
fn resolve<'a>(document: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("a $ref outside the components: {reference}"));
            let target = &document["components"]["schemas"][name];
            assert!(target.is_object(), "dangling $ref {reference}");
            target
        }
        None => schema,
    }
}

/// Every field `schema` names, as paths into a body (an array by its first
/// item).
fn walk(document: &Value, schema: &Value, at: &[Step], depth: usize, out: &mut Vec<Slot>) {
    if depth > 16 {
        return;
    }
    let schema = resolve(document, schema);
    for alternative in schema["allOf"].as_array().into_iter().flatten() {
        walk(document, alternative, at, depth + 1, out);
    }
    for key in ["oneOf", "anyOf"] {
        let alternatives = schema[key].as_array().cloned().unwrap_or_default();
        // Several objects to choose from: each holds its own fields alone.
        let objects = alternatives
            .iter()
            .filter(|a| resolve(document, a)["properties"].is_object())
            .count();
        for alternative in &alternatives {
            let alternative = resolve(document, alternative);
            let Some(properties) = alternative["properties"].as_object() else {
                walk(document, alternative, at, depth + 1, out);
                continue;
            };
            for (name, field) in properties {
                let mut path = at.to_vec();
                path.push(Step::Key(name.clone()));
                out.push(Slot::Body(path.clone(), objects >= 2));
                walk(document, field, &path, depth + 1, out);
            }
        }
    }
    for (name, field) in schema["properties"].as_object().into_iter().flatten() {
        let mut path = at.to_vec();
        path.push(Step::Key(name.clone()));
        out.push(Slot::Body(path.clone(), false));
        walk(document, field, &path, depth + 1, out);
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        let mut path = at.to_vec();
        path.push(Step::Index(0));
        out.push(Slot::Body(path.clone(), false));
        walk(document, items, &path, depth + 1, out);
    }
}

/// Every value of a baseline body, as paths.
fn leaves(value: &Value, at: &[Step], out: &mut Vec<Slot>) {
    let children: Vec<(Step, &Value)> = match value {
        Value::Object(map) => map.iter().map(|(k, v)| (Step::Key(k.clone()), v)).collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (Step::Index(i), v))
            .collect(),
        _ => Vec::new(),
    };
    for (step, child) in children {
        let mut path = at.to_vec();
        path.push(step);
        out.push(Slot::Body(path.clone(), false));
        // A URL's query parameters are values of their own.
        if let Some((_, query)) = child
            .as_str()
            .filter(|s| s.starts_with("http"))
            .and_then(|s| s.split_once('?'))
        {
            for pair in query.split('&') {
                let name = pair.split_once('=').map_or(pair, |(name, _)| name);
                out.push(Slot::UrlParam(path.clone(), name.to_owned()));
            }
        }
        leaves(child, &path, out);
    }
}

/// The operations of the document, with the slots of each (its baseline's
/// body values included).
fn operations(document: &Value, baselines: &dyn Fn(&str) -> Baseline) -> Vec<Operation> {
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let Ok(method) = method.to_uppercase().parse::<reqwest::Method>() else {
                continue;
            };
            if !["GET", "POST", "PATCH", "PUT", "DELETE"].contains(&method.as_str()) {
                continue;
            }
            let id = operation["operationId"].as_str().unwrap().to_owned();
            let mut slots = Vec::new();
            let mut required = BTreeSet::new();
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                let parameter = resolve(document, parameter);
                let name = parameter["name"].as_str().unwrap().to_owned();
                if parameter["required"] == true {
                    required.insert(name.clone());
                }
                slots.push(match parameter["in"].as_str().unwrap() {
                    "path" => Slot::Path(name),
                    "query" => Slot::Query(name),
                    "header" => Slot::Header(name),
                    other => panic!("{id}: a parameter in {other}"),
                });
            }
            let content = &operation["requestBody"]["content"];
            if let Some(schema) = content.get("application/json").map(|c| &c["schema"]) {
                let mut fields = vec![Slot::Body(Vec::new(), false)];
                walk(document, schema, &[], 0, &mut fields);
                if let Some(body) = baselines(&id).body {
                    leaves(&body, &[], &mut fields);
                }
                // One slot per path: the schema's reading (exclusive) wins.
                let mut seen = BTreeSet::new();
                for field in fields {
                    let key = match &field {
                        Slot::Body(path, _) => (path.clone(), String::new()),
                        Slot::UrlParam(path, name) => (path.clone(), name.clone()),
                        _ => unreachable!(),
                    };
                    if seen.insert(key) {
                        slots.push(field);
                    }
                }
            } else if content.is_object() {
                slots.push(Slot::Upload);
            }
            operations.push(Operation {
                id,
                method,
                path: path.clone(),
                slots,
                required,
            });
        }
    }
    operations
}

// --- baselines ---------------------------------------------------------

/// What the baselines refer to: resources the fixture made.
#[derive(Debug, Clone)]
struct Fixture {
    thread_id: String,
    run_id: String,
    /// A run that stays live while the probes follow it.
    live_run_id: String,
    job_id: String,
    attachment_id: String,
    attachment_url: String,
    exp: String,
    sig: String,
    cursor: String,
}

/// A valid request of one operation.
#[derive(Debug, Clone, Default)]
struct Baseline {
    path: BTreeMap<String, String>,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Option<Value>,
    upload: Option<(&'static str, Vec<u8>)>,
}

/// A valid `RunAgentInput` for `/api/v1/agent/runs`, every optional part
/// present: an image, a frontend tool, context, the client's time.
fn run_body(thread: &str, run: &str, image_url: &str) -> Value {
    json!({
        "threadId": thread,
        "runId": run,
        "state": {"k": "v"},
        "messages": [{
            "id": format!("{run}-u"),
            "role": "user",
            "content": [
                {"type": "text", "text": "Put a meeting in my calendar tomorrow at 9"},
                {"type": "binary", "mimeType": "image/png", "url": image_url}
            ]
        }],
        "tools": [{"name": "pick_color", "description": "Ask the user", "parameters": {"type": "object", "properties": {}}}],
        "context": [{"description": "where", "value": "home"}],
        "forwardedProps": {
            "runtime_mode": "chat",
            "client_time": {
                "device_timezone": "America/Los_Angeles",
                "client_now_iso": "2026-03-16T09:12:33-07:00",
                "client_epoch_ms": 1_773_677_553_000_i64
            }
        }
    })
}

/// A valid job, every field present.
fn job_body() -> Value {
    json!({
        "name": "report",
        "schedule": {"every_seconds": 3600},
        "timezone": "Europe/Paris",
        "prompt": "status report",
        "config": {"agent": "calendar", "enabled_tools": ["get_current_time"], "context": [{"description": "d", "value": "v"}]},
        "enabled": true
    })
}

/// The baseline of `operation`; `n` makes what must be fresh (a run's ids)
/// unique.
fn baseline(operation: &str, fixture: &Fixture, n: usize) -> Baseline {
    let path = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let query = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let run = format!("prop-run-{n}");
    match operation {
        "health" | "metrics" | "openapi" | "getProfile" | "getUsage" | "listJobs"
        | "aguiCapabilities" => Baseline::default(),
        "createRun" => Baseline {
            body: Some(run_body(
                &uuid::Uuid::new_v4().to_string(),
                &run,
                &fixture.attachment_url,
            )),
            ..Baseline::default()
        },
        "postAgui" | "agui" => {
            let mut body = run_body(
                &format!("agui-{n}"),
                &format!("prop-agui-{n}"),
                &fixture.attachment_url,
            );
            body["forwardedProps"] = json!({});
            Baseline {
                body: Some(body),
                ..Baseline::default()
            }
        }
        "getRun" | "cancelRun" => Baseline {
            path: path(&[("runId", &fixture.run_id)]),
            ..Baseline::default()
        },
        "runEvents" => Baseline {
            path: path(&[("runId", &fixture.run_id)]),
            query: query(&[("after", "1")]),
            ..Baseline::default()
        },
        "getHistory" | "history" => Baseline {
            query: query(&[("threadId", &fixture.thread_id), ("before", "2100-01-01")]),
            ..Baseline::default()
        },
        "listThreads" => Baseline {
            query: query(&[("limit", "10"), ("cursor", &fixture.cursor)]),
            ..Baseline::default()
        },
        "getThread" | "deleteThread" => Baseline {
            path: path(&[("threadId", &fixture.thread_id)]),
            ..Baseline::default()
        },
        "renameThread" => Baseline {
            path: path(&[("threadId", &fixture.thread_id)]),
            body: Some(json!({"title": "renamed"})),
            ..Baseline::default()
        },
        "patchProfile" => Baseline {
            body: Some(
                json!({"settings": {"timezone": "Europe/Paris", "locale": "fr-FR", "theme": "dark"}}),
            ),
            ..Baseline::default()
        },
        "uploadAttachment" => Baseline {
            upload: Some(("image/png", PNG.to_vec())),
            ..Baseline::default()
        },
        "downloadAttachment" => Baseline {
            path: path(&[("id", &fixture.attachment_id)]),
            query: query(&[("exp", &fixture.exp), ("sig", &fixture.sig)]),
            ..Baseline::default()
        },
        "createJob" => Baseline {
            body: Some(job_body()),
            ..Baseline::default()
        },
        "getJob" | "deleteJob" | "jobRuns" => Baseline {
            path: path(&[("id", &fixture.job_id)]),
            ..Baseline::default()
        },
        "patchJob" => Baseline {
            path: path(&[("id", &fixture.job_id)]),
            body: Some(job_body()),
            ..Baseline::default()
        },
        "calendarEvents" => Baseline {
            query: query(&[
                ("from", "2026-01-01T00:00:00Z"),
                ("to", "2026-02-01T00:00:00+01:00"),
            ]),
            ..Baseline::default()
        },
        other => panic!(
            "operation {other} has no baseline request here: add one to `baseline`, so that the property covers it"
        ),
    }
}

// --- probes ------------------------------------------------------------

/// One request, as sent.
#[derive(Debug, Clone)]
struct Probe {
    /// Its number in this run's order (with the seed, it replays).
    number: usize,
    operation: String,
    /// What it changed.
    what: String,
    method: reqwest::Method,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Option<(String, Vec<u8>)>,
    /// It follows the live run: its stream is read for [`LIVE_READ`], not
    /// to its end.
    live: bool,
}

/// What a segment of a path escapes: everything but the unreserved.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn encode(text: &Text) -> String {
    match text {
        Text::Plain(s) => percent_encoding::utf8_percent_encode(s, SEGMENT).to_string(),
        Text::Encoded(s) => s.clone(),
    }
}

/// Sets `path` in `body` to `value` (creating what leads there); an
/// exclusive field's object holds it alone.
fn set_at(body: &mut Value, path: &[Step], value: Value, exclusive: bool) {
    let Some((last, parents)) = path.split_last() else {
        *body = value;
        return;
    };
    let mut here = body;
    for (i, step) in parents.iter().enumerate() {
        let next = &path[i + 1];
        let fresh = || match next {
            Step::Key(_) => json!({}),
            Step::Index(_) => json!([]),
        };
        here = match step {
            Step::Key(key) => {
                if !here.is_object() {
                    *here = json!({});
                }
                here.as_object_mut()
                    .unwrap()
                    .entry(key.clone())
                    .or_insert_with(fresh)
            }
            Step::Index(index) => {
                if !here.is_array() {
                    *here = json!([]);
                }
                let items = here.as_array_mut().unwrap();
                while items.len() <= *index {
                    items.push(fresh());
                }
                &mut items[*index]
            }
        };
    }
    match last {
        Step::Key(key) => {
            if exclusive || !here.is_object() {
                *here = json!({});
            }
            here.as_object_mut().unwrap().insert(key.clone(), value);
        }
        Step::Index(index) => {
            if !here.is_array() {
                *here = json!([]);
            }
            let items = here.as_array_mut().unwrap();
            while items.len() <= *index {
                items.push(Value::Null);
            }
            items[*index] = value;
        }
    }
}

/// `url` with its query parameter `name` set to `value` (left out when
/// `None`).
fn with_url_param(url: &str, name: &str, value: Option<&Text>) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut pairs: Vec<String> = query
        .split('&')
        .filter(|pair| pair.split_once('=').map_or(*pair, |(n, _)| n) != name)
        .map(str::to_owned)
        .collect();
    if let Some(value) = value {
        pairs.push(format!("{name}={}", encode(value)));
    }
    format!("{base}?{}", pairs.join("&"))
}

/// Removes `path` from `body`, if it is there.
fn remove_at(body: &mut Value, path: &[Step]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = body;
    for step in parents {
        let next = match step {
            Step::Key(key) => here.get_mut(key.as_str()),
            Step::Index(index) => here.get_mut(*index),
        };
        let Some(next) = next else {
            return;
        };
        here = next;
    }
    match (last, here) {
        (Step::Key(key), Value::Object(map)) => {
            map.remove(key);
        }
        (Step::Index(index), Value::Array(items)) if *index < items.len() => {
            items.remove(*index);
        }
        _ => {}
    }
}

/// `value`, short: runs of one character past 64 are counted, not shown.
fn shown(text: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let run = chars[i..].iter().take_while(|c| **c == chars[i]).count();
        if run > 64 {
            let _ = write!(out, "<{:?} × {run}>", chars[i]);
        } else {
            out.extend(&chars[i..i + run]);
        }
        i += run;
    }
    out
}

fn describe(value: &Extreme) -> String {
    match value {
        Extreme::Text(Text::Plain(s)) => format!("{:?}", shown(s)),
        Extreme::Text(Text::Encoded(s)) => format!("raw {s}"),
        Extreme::Json(Json::Value(v)) => shown(&v.to_string()),
        Extreme::Json(Json::Raw(raw)) => format!("raw JSON {}", shown(raw)),
        Extreme::Bytes(content_type, bytes) => {
            format!("{} bytes as {content_type}", bytes.len())
        }
        Extreme::Absent => "absent".to_owned(),
    }
}

/// The request `baseline` makes with each of `changes`; `None` when a value
/// cannot go where it was meant to (a JSON array as a header).
fn probe(
    operation: &Operation,
    mut baseline: Baseline,
    base_url: &str,
    changes: &[(Slot, Extreme)],
    number: usize,
) -> Option<Probe> {
    // A value left out of the body goes first (a field that is gone
    // cannot be set after).
    for (slot, value) in changes {
        if let (Slot::Body(path, _), Extreme::Absent) = (slot, value)
            && let Some(body) = &mut baseline.body
        {
            remove_at(body, path);
        }
    }
    let mut path_values: BTreeMap<String, Text> = baseline
        .path
        .iter()
        .map(|(k, v)| (k.clone(), Text::Plain(v.clone())))
        .collect();
    let mut query: Vec<(String, Text)> = baseline
        .query
        .iter()
        .map(|(k, v)| (k.clone(), Text::Plain(v.clone())))
        .collect();
    let mut headers: Vec<(String, Vec<u8>)> = baseline
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    let mut raws: Vec<String> = Vec::new();
    let mut whole_raw: Option<String> = None;
    for (slot, value) in changes {
        match (slot, value) {
            (Slot::Path(_) | Slot::Upload, Extreme::Absent) => return None,
            (Slot::Query(name), Extreme::Absent) => {
                query.retain(|(k, _)| k != name);
                continue;
            }
            (Slot::Header(name), Extreme::Absent) => {
                headers.retain(|(k, _)| k != name);
                continue;
            }
            (Slot::Body(..), Extreme::Absent) => continue,
            (Slot::UrlParam(path, name), value) => {
                let text = match value {
                    Extreme::Absent => None,
                    value => Some(value.as_text()?),
                };
                let body = baseline.body.as_mut()?;
                let url = body.pointer_mut(&pointer(path))?;
                *url = Value::String(with_url_param(url.as_str()?, name, text.as_ref()));
                continue;
            }
            _ => {}
        }
        match slot {
            Slot::Path(name) => {
                path_values.insert(name.clone(), value.as_text()?);
            }
            Slot::Query(name) => {
                let text = value.as_text()?;
                query.retain(|(k, _)| k != name);
                query.push((name.clone(), text));
            }
            Slot::Header(name) => {
                let bytes = match value.as_text()? {
                    Text::Plain(s) => s.into_bytes(),
                    Text::Encoded(s) => s.into_bytes(),
                };
                // What HTTP cannot carry in a header is not sent at all.
                reqwest::header::HeaderValue::from_bytes(&bytes).ok()?;
                headers.retain(|(k, _)| k != name);
                headers.push((name.clone(), bytes));
            }
            Slot::UrlParam(..) => unreachable!("set above"),
            Slot::Upload => {
                let Extreme::Bytes(content_type, bytes) = value else {
                    return None;
                };
                baseline.upload = Some((content_type, bytes.clone()));
            }
            Slot::Body(path, exclusive) => {
                let json = value.as_json()?;
                let body = baseline.body.get_or_insert_with(|| json!({}));
                let inserted = match json {
                    Json::Value(v) => v,
                    Json::Raw(raw) if path.is_empty() => {
                        whole_raw = Some(raw);
                        continue;
                    }
                    Json::Raw(raw) => {
                        raws.push(raw);
                        Value::String(format!("@@RAW{}@@", raws.len() - 1))
                    }
                };
                set_at(body, path, inserted, *exclusive);
            }
        }
    }
    let mut url = format!("{base_url}{}", operation.path);
    for (name, value) in &path_values {
        url = url.replace(&format!("{{{name}}}"), &encode(value));
    }
    if !query.is_empty() {
        let pairs: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{}={}", encode(&Text::Plain(k.clone())), encode(v)))
            .collect();
        url = format!("{url}?{}", pairs.join("&"));
    }
    let body = if let Some((content_type, bytes)) = baseline.upload {
        Some((content_type.to_owned(), bytes))
    } else if let Some(raw) = whole_raw {
        Some(("application/json".to_owned(), raw.into_bytes()))
    } else {
        baseline.body.map(|body| {
            let mut text = body.to_string();
            for (i, raw) in raws.iter().enumerate() {
                text = text.replace(&format!("\"@@RAW{i}@@\""), raw);
            }
            ("application/json".to_owned(), text.into_bytes())
        })
    };
    let what = if changes.is_empty() {
        "nothing (the baseline)".to_owned()
    } else {
        changes
            .iter()
            .map(|(slot, value)| format!("{slot} = {}", describe(value)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(Probe {
        number,
        operation: operation.id.clone(),
        what,
        method: operation.method.clone(),
        url,
        headers,
        body,
        live: false,
    })
}

// --- sending -----------------------------------------------------------

/// What came back.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

/// The longest URL the `http` crate (and so reqwest) can send.
const HTTP_CRATE_MAX_URL: usize = 65_534;

async fn send(client: &reqwest::Client, probe: &Probe) -> Result<Answer, String> {
    if probe.url.len() > HTTP_CRATE_MAX_URL {
        // Two long strings in one URL: past what reqwest can send, not past
        // what an attacker can. Sent byte by byte, the server's answer is
        // judged all the same (seen: a history probe with two 60,000-byte
        // parameters broke the run as "builder error").
        return tokio::time::timeout(ANSWER_BOUND, send_raw(probe))
            .await
            .unwrap_or_else(|_| Err(format!("no complete answer within {ANSWER_BOUND:?}")));
    }
    let mut request = client.request(probe.method.clone(), &probe.url);
    for (name, value) in &probe.headers {
        request = request.header(name.as_str(), value.as_slice());
    }
    if let Some((content_type, bytes)) = &probe.body {
        request = request
            .header("content-type", content_type.as_str())
            .body(bytes.clone());
    }
    let exchange = async {
        let response = request
            .send()
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        // Streams included: a body that breaks off is a failure too (a
        // panic while streaming answers 200 and then stops).
        let mut response = response;
        let mut body = Vec::new();
        let until = tokio::time::Instant::now() + LIVE_READ;
        loop {
            let chunk = if probe.live {
                match tokio::time::timeout_at(until, response.chunk()).await {
                    Ok(chunk) => chunk,
                    // Still streaming, unbroken: as it should.
                    Err(_) => break,
                }
            } else {
                response.chunk().await
            };
            match chunk {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => return Err(format!("status {status}, then the body broke off: {e}")),
            }
        }
        Ok(Answer {
            status,
            content_type,
            body,
        })
    };
    tokio::time::timeout(ANSWER_BOUND, exchange)
        .await
        .unwrap_or_else(|_| Err(format!("no complete answer within {ANSWER_BOUND:?}")))
}

/// `probe` over a connection of its own, written by hand, `Connection:
/// close`; the answer read to the server's close.
async fn send_raw(probe: &Probe) -> Result<Answer, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let url = reqwest::Url::parse(&probe.url).map_err(|e| format!("unparsable URL: {e}"))?;
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let host = format!(
        "{}:{}",
        url.host_str().unwrap_or("127.0.0.1"),
        url.port().unwrap_or(80)
    );
    let mut request = format!(
        "{} {target} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n",
        probe.method
    )
    .into_bytes();
    for (name, value) in &probe.headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    if let Some((content_type, bytes)) = &probe.body {
        request.extend_from_slice(
            format!(
                "content-type: {content_type}\r\ncontent-length: {}\r\n",
                bytes.len()
            )
            .as_bytes(),
        );
    }
    request.extend_from_slice(b"\r\n");
    if let Some((_, bytes)) = &probe.body {
        request.extend_from_slice(bytes);
    }
    let mut socket = tokio::net::TcpStream::connect(&host)
        .await
        .map_err(|e| format!("no connection: {e}"))?;
    // The server may answer (414, 431) and close before it has read all of
    // a long request: a failed write is not yet a missing answer.
    let _ = socket.write_all(&request).await;
    let mut seen = Vec::new();
    // Bounded: a server that neither answers nor closes fails the probe.
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        socket.read_to_end(&mut seen),
    )
    .await
    .map_err(|_| "no answer and no close within 30 s".to_owned())?
    .ok();
    let Some(split) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Err(format!(
            "no answer: {:?}",
            String::from_utf8_lossy(&seen[..seen.len().min(200)])
        ));
    };
    let head = String::from_utf8_lossy(&seen[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status line: {head:?}"))?;
    let mut content_type = String::new();
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-type" => content_type = value.trim().to_owned(),
            "content-length" => length = value.trim().parse::<usize>().ok(),
            _ => {}
        }
    }
    let mut body = seen[split + 4..].to_vec();
    match length {
        Some(length) if body.len() >= length => body.truncate(length),
        Some(length) => {
            return Err(format!(
                "status {status}, then the body broke off at {} of {length} bytes",
                body.len()
            ));
        }
        None => return Err(format!("status {status} without a content-length")),
    }
    Ok(Answer {
        status,
        content_type,
        body,
    })
}

/// Why `answer` breaks the property, if it does.
fn broken(answer: &Answer) -> Option<String> {
    if answer.status >= 500 {
        return Some(format!("status {}", answer.status));
    }
    if (400..500).contains(&answer.status) {
        let detail = serde_json::from_slice::<Value>(&answer.body)
            .ok()
            .filter(|v| v.as_object().is_some_and(|o| o.len() == 1))
            .and_then(|v| v["detail"].as_str().map(str::to_owned));
        if detail.is_none() || !answer.content_type.starts_with("application/json") {
            return Some(format!(
                "a {} whose body is not JSON {{\"detail\": <string>}}",
                answer.status
            ));
        }
    }
    None
}

fn report(probe: &Probe, why: &str, answer: Option<&Answer>) -> String {
    let mut text = format!(
        "#{} {} — {}\n  changed: {}\n  request: {} {}\n",
        probe.number,
        probe.operation,
        shown(why),
        probe.what,
        probe.method,
        shown(&probe.url)
    );
    for (name, value) in &probe.headers {
        let _ = writeln!(
            text,
            "  header: {name}: {}",
            shown(&String::from_utf8_lossy(value))
        );
    }
    if let Some((content_type, bytes)) = &probe.body {
        let _ = writeln!(
            text,
            "  body ({content_type}, {} bytes): {}",
            bytes.len(),
            shown(&String::from_utf8_lossy(bytes))
        );
    }
    if let Some(answer) = answer {
        let _ = writeln!(
            text,
            "  answer: {} {} {}",
            answer.status,
            answer.content_type,
            shown(&String::from_utf8_lossy(
                &answer.body[..answer.body.len().min(2048)]
            ))
        );
    }
    text
}

// --- the fixture -------------------------------------------------------

/// What the user message of the run that stays live starts with.
const LIVE: &str = "live fixture:";
/// How long a probe of the live run's stream reads it (it does not end):
/// its agent says a word every 20 ms, so a follower meets live events well
/// within this, even on a loaded machine. (Only the probes whose resume
/// point is a number wait this long: the rest are refused at once.)
const LIVE_READ: Duration = Duration::from_secs(1);

/// The scripted pipeline `agwire serve` runs without a provider, except
/// for the run that must stay live while the probes follow it: the
/// built-in agent, a word every 20 ms until cancelled.
#[derive(Debug)]
struct WithLiveRun {
    pipeline: LlmBrain,
    live: agwire_service::brain::Fixed,
}

impl WithLiveRun {
    fn new() -> Self {
        let model = agwire_service::brain::demo::model(Duration::ZERO);
        Self {
            pipeline: LlmBrain::new(Arc::new(model.clone()), Arc::new(model)),
            live: agwire_service::brain::Fixed::new(
                Arc::new(agwire_service::BuiltinAgent::with_token_delay(
                    Duration::from_millis(20),
                )),
                "live",
            ),
        }
    }
}

impl Brain for WithLiveRun {
    fn agent(&self, setup: RunSetup) -> Arc<dyn agwire_server::DynAgent> {
        let live = setup.history.iter().rev().find_map(|m| match m {
            agwire_core::Message::User(user) => Some(user.content.text()),
            _ => None,
        });
        if live.is_some_and(|text| text.starts_with(LIVE)) {
            self.live.agent(setup)
        } else {
            self.pipeline.agent(setup)
        }
    }

    fn describe(&self) -> String {
        self.pipeline.describe()
    }
}

async fn json_answer(response: reqwest::Response, want: u16) -> Value {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(status, want, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// A run that ended, a job, an image, a page cursor: what baselines name.
async fn fixture(client: &reqwest::Client, base: &str) -> Fixture {
    let uploaded = json_answer(
        client
            .post(format!("{base}/api/v1/agent/attachments"))
            .header("content-type", "image/png")
            .body(PNG.to_vec())
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    let attachment_url = uploaded["url"].as_str().unwrap().to_owned();
    let attachment_id = uploaded["id"].as_str().unwrap().to_owned();
    let query_value = |name: &str| {
        attachment_url
            .split(['?', '&'])
            .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {attachment_url} (a bucket's URL?)"))
            .to_owned()
    };
    let (exp, sig) = (query_value("exp"), query_value("sig"));
    let thread_id = uuid::Uuid::new_v4().to_string();
    let run_id = "prop-fixture".to_owned();
    json_answer(
        client
            .post(format!("{base}/api/v1/agent/runs"))
            .json(&run_body(&thread_id, &run_id, &attachment_url))
            .send()
            .await
            .unwrap(),
        202,
    )
    .await;
    wait_ended(client, base, &run_id).await.unwrap();
    let job = json_answer(
        client
            .post(format!("{base}/api/v1/automation/jobs"))
            .json(&job_body())
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    let job_id = job["id"].as_str().unwrap().to_owned();
    let live_run_id = "prop-live".to_owned();
    // A word every 20 ms: ~100 s.
    let words = "w ".repeat(4900);
    json_answer(
        client
            .post(format!("{base}/api/v1/agent/runs"))
            .json(&common::body(
                &uuid::Uuid::new_v4().to_string(),
                &live_run_id,
                &format!("{LIVE} {words}"),
            ))
            .send()
            .await
            .unwrap(),
        202,
    )
    .await;
    // Two threads (the run's, the job's): a page of one has a next.
    let page = json_answer(
        client
            .get(format!("{base}/api/v1/agent/threads?limit=1"))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let cursor = page["nextCursor"].as_str().unwrap().to_owned();
    Fixture {
        thread_id,
        run_id,
        live_run_id,
        job_id,
        attachment_id,
        attachment_url,
        exp,
        sig,
        cursor,
    }
}

/// The run's state once it has ended (fails after a minute); `None` when
/// there is no such run.
async fn wait_ended(client: &reqwest::Client, base: &str, run_id: &str) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let url = format!(
        "{base}/api/v1/agent/runs/{}",
        percent_encoding::utf8_percent_encode(run_id, SEGMENT)
    );
    loop {
        let response = client.get(&url).send().await.unwrap();
        if response.status().as_u16() == 404 {
            return None;
        }
        let run: Value = response.json().await.unwrap();
        if !["queued", "running"].contains(&run["status"].as_str().unwrap_or("queued")) {
            return Some(run);
        }
        assert!(
            Instant::now() < deadline,
            "run {run_id} did not end within a minute: {run}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The run's state once it has started (fails after a minute).
async fn wait_started(client: &reqwest::Client, base: &str, run_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run: Value = client
            .get(format!("{base}/api/v1/agent/runs/{run_id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if run["status"] != "queued" {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "run {run_id} did not start within a minute: {run}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A resource only a destructive operation's baseline may use up.
async fn throwaway(
    client: &reqwest::Client,
    base: &str,
    operation: &str,
    fixture: &Fixture,
) -> Fixture {
    let mut own = fixture.clone();
    match operation {
        "deleteThread" => {
            own.thread_id = uuid::Uuid::new_v4().to_string();
            let run = format!("prop-throwaway-{}", own.thread_id);
            json_answer(
                client
                    .post(format!("{base}/api/v1/agent/runs"))
                    .json(&common::body(&own.thread_id, &run, "hi"))
                    .send()
                    .await
                    .unwrap(),
                202,
            )
            .await;
            wait_ended(client, base, &run).await.unwrap();
        }
        "deleteJob" => {
            let job = json_answer(
                client
                    .post(format!("{base}/api/v1/automation/jobs"))
                    .json(&job_body())
                    .send()
                    .await
                    .unwrap(),
                201,
            )
            .await;
            own.job_id = job["id"].as_str().unwrap().to_owned();
        }
        _ => {}
    }
    own
}

/// The core set: every slot of every operation with every core value (a
/// query value also with the other optional ones left out), and where the
/// live run's stream resumes. `number` counts the probes.
fn core_probes(
    operations: &[Operation],
    fixture: &Fixture,
    base: &str,
    number: &mut usize,
) -> Vec<Probe> {
    let mut probes = Vec::new();
    // The stream of a run that is live: what a follower resumes after
    // meets live events. (Sent first: the run is live for a minute and
    // more.)
    for operation in operations.iter().filter(|o| o.id == "runEvents") {
        for slot in operation
            .slots
            .iter()
            .filter(|s| !matches!(s, Slot::Path(_)))
        {
            for value in core_values(slot) {
                let mut live = fixture.clone();
                live.run_id.clone_from(&fixture.live_run_id);
                let valid = baseline(&operation.id, &live, *number);
                let changes = [(slot.clone(), value)];
                if let Some(mut p) = probe(operation, valid, base, &changes, *number) {
                    p.live = true;
                    p.what.push_str(" (the live run)");
                    probes.push(p);
                    *number += 1;
                }
            }
        }
    }
    for operation in operations {
        for slot in &operation.slots {
            for value in core_values(slot) {
                let mut changes = vec![(slot.clone(), value)];
                let valid = baseline(&operation.id, fixture, *number);
                if let Some(p) = probe(operation, valid, base, &changes, *number) {
                    probes.push(p);
                    *number += 1;
                }
                // A query value also alone: the other optional ones left
                // out, so their defaults meet it (`from` without `to`).
                let Slot::Query(name) = slot else {
                    continue;
                };
                let valid = baseline(&operation.id, fixture, *number);
                let others: Vec<(Slot, Extreme)> = valid
                    .query
                    .iter()
                    .filter(|(k, _)| k != name && !operation.required.contains(k))
                    .map(|(k, _)| (Slot::Query(k.clone()), Extreme::Absent))
                    .collect();
                if others.is_empty() {
                    continue;
                }
                changes.extend(others);
                if let Some(p) = probe(operation, valid, base, &changes, *number) {
                    probes.push(p);
                    *number += 1;
                }
            }
        }
    }
    probes
}

// --- the property ------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_input_reaches_a_5xx_and_every_4xx_is_a_detail() {
    let seed = std::env::var("AGWIRE_PROPERTY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let random_probes = std::env::var("AGWIRE_PROPERTY_RANDOM")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(RANDOM_PROBES);
    eprintln!(
        "api_property: seed {seed} (AGWIRE_PROPERTY_SEED={seed} replays it), {random_probes} random requests, NUL characters {}",
        if nul_enabled() {
            "included"
        } else {
            "left out (AGWIRE_PROPERTY_NUL=0)"
        }
    );
    let mut rng = StdRng::seed_from_u64(seed);
    // The pipeline `agwire serve` runs without a provider: the scripted
    // model, the router, backend tools (the calendar, the clock).
    let server = common::start_brain_with(
        &Config::default(),
        Auth::none(),
        Arc::new(WithLiveRun::new()),
    )
    .await;
    let addr: SocketAddr = server.addr;
    let base = format!("http://{addr}");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let started = Instant::now();
    let document = common::get_json(addr, "/openapi.json").await;
    let fixture = fixture(&client, &base).await;
    let operations = operations(&document, &|id| baseline(id, &fixture, 0));

    // The walk found what the document describes (a walk that finds
    // nothing would pass vacuously).
    let named: BTreeSet<String> = operations
        .iter()
        .flat_map(|o| o.slots.iter().map(move |s| format!("{} {s}", o.id)))
        .collect();
    for expected in [
        "createRun body /forwardedProps/client_time/client_epoch_ms",
        "createRun body /messages/0/content/1/url",
        "createRun body /messages/0/content/1/url ?exp",
        "createRun body /tools/0/parameters",
        "createJob body /schedule/cron",
        "patchJob body /schedule/every_seconds",
        "calendarEvents query from",
        "runEvents header Last-Event-ID",
        "listThreads query cursor",
        "downloadAttachment query exp",
        "uploadAttachment upload body",
        "patchProfile body /settings/timezone",
    ] {
        assert!(
            named.contains(expected),
            "the document's walk missed {expected}; it found: {named:#?}"
        );
    }

    // Each baseline succeeds: a probe changes one thing of a valid request.
    for operation in &operations {
        let own = throwaway(&client, &base, &operation.id, &fixture).await;
        let valid = baseline(&operation.id, &own, usize::MAX);
        let valid = probe(operation, valid, &base, &[], 0).unwrap();
        let answer = send(&client, &valid).await.unwrap();
        assert!(
            (200..300).contains(&answer.status),
            "the baseline must succeed:\n{}",
            report(&valid, "not a 2xx", Some(&answer))
        );
        if operation.id == "createJob" {
            let job: Value = serde_json::from_slice(&answer.body).unwrap();
            delete_job(&client, &base, &job).await;
        }
    }

    // The core set: every slot with every core value; then the random part.
    let mut number = 1;
    let mut probes = core_probes(&operations, &fixture, &base, &mut number);
    let core = probes.len();
    while probes.len() < core + random_probes {
        let operation = operations.choose(&mut rng).unwrap();
        if operation.slots.is_empty() {
            continue;
        }
        let count = rng.random_range(1..=3).min(operation.slots.len());
        let changes: Vec<(Slot, Extreme)> = operation
            .slots
            .choose_multiple(&mut rng, count)
            .map(|slot| (slot.clone(), random_value(slot, &mut rng)))
            .collect();
        let valid = baseline(&operation.id, &fixture, number);
        if let Some(p) = probe(operation, valid, &base, &changes, number) {
            probes.push(p);
            number += 1;
        }
    }
    let generated = started.elapsed();

    // Sent side by side; each answer judged as it comes.
    let live = wait_started(&client, &base, &fixture.live_run_id).await;
    assert_eq!(live["status"], "running", "the live run is live: {live}");
    let sending = Instant::now();
    let results: Vec<(Probe, Result<Answer, String>)> = futures_util::stream::iter(probes)
        .map(|probe| {
            let (client, base) = (&client, &base);
            async move {
                let answer = send(client, &probe).await;
                // A job a probe created is deleted at once (a user may have
                // 100: the rest of the probes must reach their checks).
                if let Ok(answer) = &answer
                    && probe.operation == "createJob"
                    && answer.status == 201
                    && let Ok(job) = serde_json::from_slice::<Value>(&answer.body)
                {
                    delete_job(client, base, &job).await;
                }
                (probe, answer)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let sent = sending.elapsed();

    let mut failures: Vec<String> = Vec::new();
    let mut per_operation: BTreeMap<String, (usize, BTreeMap<u16, usize>)> = BTreeMap::new();
    let mut runs: Vec<(&Probe, &Answer, String)> = Vec::new();
    for (probe, answer) in &results {
        let entry = per_operation.entry(probe.operation.clone()).or_default();
        entry.0 += 1;
        match answer {
            Err(why) => failures.push(report(probe, why, None)),
            Ok(answer) => {
                *entry.1.entry(answer.status).or_default() += 1;
                if let Some(why) = broken(answer) {
                    failures.push(report(probe, &why, Some(answer)));
                }
                // The runs accepted, to see each end.
                if (probe.operation == "createRun" && answer.status == 202)
                    || (probe.operation.contains("gui") && answer.status == 200)
                {
                    let body: Value = probe
                        .body
                        .as_ref()
                        .and_then(|(_, b)| serde_json::from_slice(b).ok())
                        .unwrap_or(Value::Null);
                    // (A URL cannot name a run `.` or `..`: a client
                    // normalizes the dot segment away.)
                    if let Some(run) = body["runId"].as_str().filter(|r| !matches!(*r, "." | ".."))
                    {
                        runs.push((probe, answer, run.to_owned()));
                    }
                }
            }
        }
    }
    // Every accepted run ends, and none with a panic or an internal error.
    let ending = Instant::now();
    let cancelled = client
        .post(format!(
            "{base}/api/v1/agent/runs/{}/cancel",
            fixture.live_run_id
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status().as_u16(), 202);
    let live = wait_ended(&client, &base, &fixture.live_run_id)
        .await
        .unwrap();
    assert!(
        ["cancelled", "succeeded"].contains(&live["status"].as_str().unwrap_or("")),
        "the live run: {live}"
    );
    let ended: Vec<_> = futures_util::stream::iter(&runs)
        .map(|(probe, answer, run)| {
            let (client, base) = (&client, &base);
            async move { (probe, answer, run, wait_ended(client, base, run).await) }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut gone = 0;
    for (probe, answer, run, state) in ended {
        // A probe of `deleteThread` may have deleted its thread since (a
        // thread id of one is a value of the other).
        let Some(state) = state else {
            gone += 1;
            continue;
        };
        let code = state["error"]["code"].as_str().unwrap_or("");
        if ["panic", "internal"].contains(&code) {
            failures.push(report(
                probe,
                &format!("run {run} ended with {code}: {}", state["error"]),
                Some(answer),
            ));
        }
    }
    let health = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 200, "the service is still up");

    for (operation, (count, statuses)) in &per_operation {
        eprintln!("  {operation}: {count} requests, statuses {statuses:?}");
    }
    eprintln!(
        "api_property: {} requests ({core} core, {} random) on {} in {:.1?} (generated in {:.1?}, sent in {:.1?}, {} runs checked in {:.1?}, {gone} of them deleted by a later probe); seed {seed}",
        results.len(),
        results.len() - core,
        server.database.describe(),
        started.elapsed(),
        generated,
        sent,
        runs.len(),
        ending.elapsed(),
    );
    if !failures.is_empty() {
        for failure in failures.iter().take(PRINTED_FAILURES) {
            eprintln!("{failure}");
        }
        panic!(
            "{} of {} requests broke the property (the first {} above); replay with AGWIRE_PROPERTY_SEED={seed}",
            failures.len(),
            results.len(),
            failures.len().min(PRINTED_FAILURES)
        );
    }
}

async fn delete_job(client: &reqwest::Client, base: &str, job: &Value) {
    let id = job["id"].as_str().unwrap();
    let deleted = client
        .delete(format!("{base}/api/v1/automation/jobs/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
}
