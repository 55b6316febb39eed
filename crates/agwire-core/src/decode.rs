//! Schema-directed decoding from JSON values.
//!
//! Every protocol type is read by hand from a [`serde_json::Value`] rather than by
//! `#[derive(Deserialize)]`, because the processing model of AG-UI 1.1 needs things
//! derive cannot express: unknown members are *stripped with a warning naming
//! their JSON pointer*, an unrecognised member of a discriminated union (a message
//! role, a content-part type, a patch `op`, an outcome `type`) removes the element
//! that carries it, a handful of legacy `null`s read as absence, and a malformed
//! known value is an error that says where and why.
//!
//! [`DecodeMode::Strict`] turns every tolerance off: it accepts exactly what the
//! 1.1 JSON Schema accepts, which is what schema-level conformance tests need.

use std::fmt;

use serde_json::{Map, Value};

use crate::Warning;

/// How tolerant decoding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DecodeMode {
    /// The runtime processing model: unknown members and unrecognised union
    /// members are removed with a [`Warning`], snake_case spellings are accepted,
    /// legacy (0.x) shapes are upgraded. Malformed known values are still errors.
    #[default]
    Lenient,
    /// Exactly the 1.1 schema: anything it does not describe is an error.
    Strict,
}

/// A decoded value together with the warnings produced while reading it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<T> {
    /// The value.
    pub value: T,
    /// What was removed or translated to obtain it.
    pub warnings: Vec<Warning>,
}

/// A value that cannot be read as the protocol type it claims to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {context} at '{path}': {reason}")]
pub struct DecodeError {
    /// What was being decoded: an event type such as `TEXT_MESSAGE_CONTENT`, or a
    /// type name such as `RunAgentInput`.
    pub context: String,
    /// JSON pointer of the offending value inside the decoded document (`""` is
    /// the document itself).
    pub path: String,
    /// What is wrong, in the validator's words (`expected string, received number`).
    pub reason: String,
}

/// Decoding state shared by one top-level decode.
#[derive(Debug)]
pub(crate) struct Cx {
    pub(crate) mode: DecodeMode,
    pub(crate) context: &'static str,
    pub(crate) warnings: Vec<Warning>,
}

impl Cx {
    pub(crate) fn new(mode: DecodeMode, context: &'static str) -> Self {
        Self {
            mode,
            context,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn lenient(&self) -> bool {
        self.mode == DecodeMode::Lenient
    }

    pub(crate) fn error(&self, path: &Path<'_>, reason: impl Into<String>) -> Fail {
        Fail::Error(DecodeError {
            context: self.context.to_owned(),
            path: path.render(),
            reason: reason.into(),
        })
    }

    pub(crate) fn strip(&mut self, path: &Path<'_>) {
        self.warnings
            .push(Warning::stripped(self.context, &path.render()));
    }

    fn legacy_null(&mut self, path: &Path<'_>) {
        self.warnings
            .push(Warning::legacy_null(self.context, &path.render()));
    }
}

/// Why a value could not be produced.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The value is an unrecognised union member: the container decides whether
    /// that removes a field, an element, or (in a required position) itself.
    /// `tag` is the member that names the variant (`role`, `type`, `op`):
    /// where strict decoding points its error.
    Drop {
        /// The discriminating member.
        tag: &'static str,
    },
    /// The value is malformed.
    Error(DecodeError),
}

pub(crate) type DResult<T> = Result<T, Fail>;

/// A JSON pointer built on the stack while descending; rendered only on demand.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    seg: Seg<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Seg<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> Path<'a> {
    pub(crate) const ROOT: Path<'static> = Path {
        parent: None,
        seg: Seg::Root,
    };

    pub(crate) fn key(&'a self, key: &'a str) -> Path<'a> {
        Path {
            parent: Some(self),
            seg: Seg::Key(key),
        }
    }

    pub(crate) fn index(&'a self, index: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            seg: Seg::Index(index),
        }
    }

    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) {
        use fmt::Write as _;
        if let Some(parent) = self.parent {
            parent.render_into(out);
        }
        match self.seg {
            Seg::Root => {}
            Seg::Key(key) => {
                out.push('/');
                out.push_str(key);
            }
            Seg::Index(index) => {
                let _ = write!(out, "/{index}");
            }
        }
    }
}

/// Names the JSON kind of a value the way the reference validator does.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(crate) fn expected(what: &str, got: &Value) -> String {
    format!("expected {what}, received {}", kind(got))
}

/// A protocol type that can be read from a JSON value.
pub(crate) trait Decode: Sized {
    /// What the validator says it expected when the value has the wrong kind.
    const EXPECTED: &'static str;

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self>;
}

impl Decode for String {
    const EXPECTED: &'static str = "string";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        match value {
            Value::String(s) => Ok(s),
            other => Err(cx.error(path, expected("string", &other))),
        }
    }
}

impl Decode for bool {
    const EXPECTED: &'static str = "boolean";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        match value {
            Value::Bool(b) => Ok(b),
            other => Err(cx.error(path, expected("boolean", &other))),
        }
    }
}

/// The largest integer JavaScript represents exactly; the schema bounds every
/// integer by it.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// Reads an integer as JavaScript would: `1.0` and `1e3` are integers, `1.5` is not.
fn integer(value: &Value) -> Option<Result<i64, ()>> {
    let Value::Number(n) = value else {
        return None;
    };
    if let Some(i) = n.as_i64() {
        return Some(Ok(i));
    }
    if n.as_u64().is_some() {
        return Some(Err(())); // above i64, certainly above the safe range
    }
    let f = n.as_f64()?;
    if f.fract() == 0.0 && f.abs() <= 9.3e18 {
        #[allow(clippy::cast_possible_truncation)]
        return Some(Ok(f as i64));
    }
    if f.fract() == 0.0 {
        return Some(Err(()));
    }
    None
}

/// `timestamp`: an integer within ±(2^53 − 1).
#[derive(Debug)]
pub(crate) struct Timestamp(pub(crate) i64);

impl Decode for Timestamp {
    const EXPECTED: &'static str = "int";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        match integer(&value) {
            Some(Ok(i)) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i) => Ok(Timestamp(i)),
            Some(_) => Err(cx.error(path, "integer outside the safe range ±(2^53 - 1)")),
            None => Err(cx.error(path, expected("int", &value))),
        }
    }
}

/// A count: an integer in 0..=2^53 − 1.
#[derive(Debug)]
pub(crate) struct Count(pub(crate) u64);

impl Decode for Count {
    const EXPECTED: &'static str = "int";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        match integer(&value) {
            Some(Ok(i)) if (0..=MAX_SAFE_INTEGER).contains(&i) => {
                Ok(Count(u64::try_from(i).unwrap_or_default()))
            }
            Some(Ok(i)) if i < 0 => Err(cx.error(path, "expected a non-negative integer")),
            Some(_) => Err(cx.error(path, "integer above 2^53 - 1")),
            None => Err(cx.error(path, expected("int", &value))),
        }
    }
}

/// Any JSON value, `null` included (`STATE_SNAPSHOT.snapshot`, `RAW.event`,
/// `CUSTOM.value`, a patch `value`).
#[derive(Debug)]
pub(crate) struct AnyJson(pub(crate) Value);

impl Decode for AnyJson {
    const EXPECTED: &'static str = "any";

    fn decode(value: Value, _cx: &mut Cx, _path: &Path<'_>) -> DResult<Self> {
        Ok(AnyJson(value))
    }
}

/// Any JSON value except a bare `null` (`rawEvent`, `result`, `forwardedProps`, …).
#[derive(Debug)]
pub(crate) struct NonNullJson(pub(crate) Value);

impl Decode for NonNullJson {
    const EXPECTED: &'static str = "any";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        if value.is_null() {
            return Err(cx.error(path, "expected a value other than null"));
        }
        Ok(NonNullJson(value))
    }
}

impl Decode for Map<String, Value> {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        match value {
            Value::Object(map) => Ok(map),
            other => Err(cx.error(path, expected("object", &other))),
        }
    }
}

impl<T: Decode> Decode for Vec<T> {
    const EXPECTED: &'static str = "array";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let items = match value {
            Value::Array(items) => items,
            other => return Err(cx.error(path, expected("array", &other))),
        };
        let mut out = Vec::with_capacity(items.len());
        for (index, item) in items.into_iter().enumerate() {
            let item_path = path.index(index);
            let mark = cx.warnings.len();
            match T::decode(item, cx, &item_path) {
                Ok(value) => out.push(value),
                Err(Fail::Drop { tag }) => {
                    // The element goes whole, and with it whatever its descent reported.
                    cx.warnings.truncate(mark);
                    if !cx.lenient() {
                        return Err(cx.error(&item_path.key(tag), "unrecognised union member"));
                    }
                    cx.strip(&item_path);
                }
                Err(err) => return Err(err),
            }
        }
        Ok(out)
    }
}

/// Reads the fields of one JSON object, then accounts for what is left over.
#[derive(Debug)]
pub(crate) struct Obj<'p> {
    /// A vector rather than the map: objects here have a handful of members,
    /// and a linear scan of short keys beats hashing each lookup (measured:
    /// hashing was a fifth of decode time).
    members: Vec<(String, Value)>,
    path: &'p Path<'p>,
    /// Whether any key could be a snake_case alias; checked once so that the
    /// common camelCase-only object never pays for alias lookups.
    snake: bool,
}

impl<'p> Obj<'p> {
    pub(crate) fn new(value: Value, cx: &Cx, path: &'p Path<'p>) -> DResult<Self> {
        match value {
            Value::Object(map) => Ok(Self::from_map(map, cx, path)),
            other => Err(cx.error(path, expected("object", &other))),
        }
    }

    pub(crate) fn from_map(map: Map<String, Value>, cx: &Cx, path: &'p Path<'p>) -> Self {
        Self::from_members(map.into_iter().collect(), cx, path)
    }

    pub(crate) fn from_members(members: Vec<(String, Value)>, cx: &Cx, path: &'p Path<'p>) -> Self {
        let snake = cx.lenient() && members.iter().any(|(k, _)| k.contains('_'));
        Self {
            members,
            path,
            snake,
        }
    }

    pub(crate) fn path(&self) -> &'p Path<'p> {
        self.path
    }

    /// Removes a member, trying the snake_case spelling when the camelCase one is
    /// absent (lenient mode only).
    pub(crate) fn take(&mut self, key: &'static str) -> Option<Value> {
        if let Some(i) = self.members.iter().position(|(k, _)| k == key) {
            return Some(self.members.remove(i).1);
        }
        if !self.snake || !key.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let i = self.members.iter().position(|(k, _)| is_snake_of(k, key))?;
        Some(self.members.remove(i).1)
    }

    pub(crate) fn req<T: Decode>(&mut self, cx: &mut Cx, key: &'static str) -> DResult<T> {
        let path = self.path.key(key);
        match self.take(key) {
            Some(value) => T::decode(value, cx, &path),
            None => Err(cx.error(
                &path,
                format!("expected {}, received undefined", T::EXPECTED),
            )),
        }
    }

    /// An optional member; `null` is malformed ("absent means absent").
    pub(crate) fn opt<T: Decode>(&mut self, cx: &mut Cx, key: &'static str) -> DResult<Option<T>> {
        let path = self.path.key(key);
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        if value.is_null() {
            return Err(cx.error(&path, format!("expected {}, received null", T::EXPECTED)));
        }
        Self::optional_value(value, cx, &path)
    }

    /// An optional member whose bare `null` pre-1.0 producers wrote for absence;
    /// in lenient mode the `null` is read as absent, with a warning.
    pub(crate) fn opt_legacy_null<T: Decode>(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
    ) -> DResult<Option<T>> {
        let path = self.path.key(key);
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        if value.is_null() {
            if cx.lenient() {
                cx.legacy_null(&path);
                return Ok(None);
            }
            return Err(cx.error(&path, format!("expected {}, received null", T::EXPECTED)));
        }
        Self::optional_value(value, cx, &path)
    }

    fn optional_value<T: Decode>(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Option<T>> {
        let mark = cx.warnings.len();
        match T::decode(value, cx, path) {
            Ok(v) => Ok(Some(v)),
            Err(Fail::Drop { tag }) => {
                cx.warnings.truncate(mark);
                if !cx.lenient() {
                    return Err(cx.error(&path.key(tag), "unrecognised union member"));
                }
                cx.strip(path);
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// A member that must be a given string constant (`role: "reasoning"`).
    pub(crate) fn req_literal(&mut self, cx: &mut Cx, key: &'static str, lit: &str) -> DResult<()> {
        let path = self.path.key(key);
        match self.take(key) {
            Some(Value::String(s)) if s == lit => Ok(()),
            _ => Err(cx.error(&path, format!("Invalid input: expected \"{lit}\""))),
        }
    }

    /// An optional constant member; returns whether it was present.
    pub(crate) fn opt_literal(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        lit: &str,
    ) -> DResult<bool> {
        let path = self.path.key(key);
        match self.take(key) {
            None => Ok(false),
            Some(Value::String(s)) if s == lit => Ok(true),
            Some(_) => Err(cx.error(&path, format!("Invalid input: expected \"{lit}\""))),
        }
    }

    /// Strips (lenient) or rejects (strict) whatever no field claimed.
    pub(crate) fn finish(self, cx: &mut Cx) -> DResult<()> {
        if self.members.is_empty() {
            return Ok(());
        }
        for (key, _) in &self.members {
            let path = self.path.key(key);
            if !cx.lenient() {
                return Err(cx.error(&path, "unrecognised property"));
            }
            cx.strip(&path);
        }
        Ok(())
    }

    /// Hands back the members no field claimed, for objects the protocol keeps
    /// open (JSON Patch operations).
    pub(crate) fn rest(self) -> Map<String, Value> {
        self.members.into_iter().collect()
    }
}

/// `message_id` is the snake spelling of `messageId`, compared without allocating.
fn is_snake_of(candidate: &str, camel: &str) -> bool {
    let mut c = candidate.bytes();
    for b in camel.bytes() {
        if b.is_ascii_uppercase() {
            if c.next() != Some(b'_') || c.next() != Some(b.to_ascii_lowercase()) {
                return false;
            }
        } else if c.next() != Some(b) {
            return false;
        }
    }
    c.next().is_none()
}

/// Reads the discriminator of a union member; `None` means "no recognisable
/// tag", which makes the member unrecognised.
pub(crate) fn tag<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v str> {
    map.get(key).and_then(Value::as_str)
}

/// Runs a top-level decode: maps an escaping `Drop` to an error, since nothing
/// encloses the value to absorb it.
pub(crate) fn top<T>(
    mode: DecodeMode,
    context: &'static str,
    f: impl FnOnce(&mut Cx) -> DResult<T>,
) -> Result<Decoded<T>, DecodeError> {
    let mut cx = Cx::new(mode, context);
    match f(&mut cx) {
        Ok(value) => Ok(Decoded {
            value,
            warnings: cx.warnings,
        }),
        Err(Fail::Error(err)) => Err(err),
        Err(Fail::Drop { tag }) => Err(DecodeError {
            context: context.to_owned(),
            path: format!("/{tag}"),
            reason: "unrecognised union member".to_owned(),
        }),
    }
}

/// A JSON document whose top-level object is kept as a member list.
#[derive(Debug)]
pub(crate) enum TopLevel {
    Object(Vec<(String, Value)>),
    Other(Value),
}

impl<'de> serde::Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = TopLevel;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TopLevel, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    // Duplicate keys: the last one wins, as in JSON.parse.
                    if let Some(slot) = members
                        .iter_mut()
                        .find(|(k, _): &&mut (String, Value)| *k == key)
                    {
                        slot.1 = value;
                    } else {
                        members.push((key, value));
                    }
                }
                Ok(TopLevel::Object(members))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<TopLevel, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Value>()? {
                    items.push(item);
                }
                Ok(TopLevel::Other(Value::Array(items)))
            }

            fn visit_bool<E>(self, v: bool) -> Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::Bool(v)))
            }

            fn visit_i64<E>(self, v: i64) -> Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::from(v)))
            }

            fn visit_u64<E>(self, v: u64) -> Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::from(v)))
            }

            fn visit_f64<E>(self, v: f64) -> Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::from(v)))
            }

            fn visit_str<E>(self, v: &str) -> Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::from(v)))
            }

            fn visit_unit<E>(self) -> Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::Null))
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

/// A protocol type that can be decoded from JSON with [`decode`].
pub trait Decodable: Sized {
    /// The schema name of the type (`"RunAgentInput"`, `"Message"`, …).
    const NAME: &'static str;

    /// Decodes a value of this type in the given mode.
    fn decode_with(value: Value, mode: DecodeMode) -> Result<Decoded<Self>, DecodeError>;
}

/// Decodes any protocol type from a JSON value.
///
/// ```
/// use agwire_core::{RunAgentInput, decode::{decode, DecodeMode}};
/// let body = serde_json::json!({"thread_id": "t", "run_id": "r", "messages": []});
/// let input = decode::<RunAgentInput>(body, DecodeMode::Lenient).unwrap().value;
/// assert_eq!(input.thread_id, "t");
/// ```
pub fn decode<T: Decodable>(value: Value, mode: DecodeMode) -> Result<Decoded<T>, DecodeError> {
    T::decode_with(value, mode)
}

/// Implements [`Decodable`] and a lenient, warning-tracing `Deserialize` for
/// protocol types.
macro_rules! protocol_type {
    ($($ty:ty => $name:literal),* $(,)?) => {
        $(
            impl $crate::decode::Decodable for $ty {
                const NAME: &'static str = $name;

                fn decode_with(
                    value: serde_json::Value,
                    mode: $crate::decode::DecodeMode,
                ) -> Result<$crate::decode::Decoded<Self>, $crate::decode::DecodeError> {
                    $crate::decode::top(mode, $name, |cx| {
                        <$ty as $crate::decode::Decode>::decode(value, cx, &$crate::decode::Path::ROOT)
                    })
                }
            }

            impl<'de> serde::Deserialize<'de> for $ty {
                fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    let value = serde_json::Value::deserialize(deserializer)?;
                    let decoded = <$ty as $crate::decode::Decodable>::decode_with(
                        value,
                        $crate::decode::DecodeMode::Lenient,
                    )
                    .map_err(serde::de::Error::custom)?;
                    for warning in &decoded.warnings {
                        warning.trace();
                    }
                    Ok(decoded.value)
                }
            }
        )*
    };
}
pub(crate) use protocol_type;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_alias_matches_exactly() {
        assert!(is_snake_of("message_id", "messageId"));
        assert!(is_snake_of("tool_call_id", "toolCallId"));
        assert!(!is_snake_of("message_idx", "messageId"));
        assert!(!is_snake_of("messageid", "messageId"));
        assert!(!is_snake_of("message", "messageId"));
    }

    #[test]
    fn paths_render_as_json_pointers() {
        let root = Path::ROOT;
        let a = root.key("messages");
        let b = a.index(3);
        let c = b.key("content");
        assert_eq!(c.render(), "/messages/3/content");
        assert_eq!(root.render(), "");
    }

    #[test]
    fn integers_follow_javascript() {
        assert_eq!(integer(&serde_json::json!(1.0)), Some(Ok(1)));
        assert_eq!(integer(&serde_json::json!(1e3)), Some(Ok(1000)));
        assert_eq!(integer(&serde_json::json!(1.5)), None);
        assert_eq!(integer(&serde_json::json!("1")), None);
    }
}
