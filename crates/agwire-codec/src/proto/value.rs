//! JSON ↔ the `Value`/`Struct` fields of the generated code.

use serde_json::{Map, Number, Value};

use super::json::{JsonStruct, JsonValue};

/// A JSON value for a `google.protobuf.Value` field.
pub(crate) fn to_value(json: &Value) -> JsonValue {
    JsonValue(Some(json.clone()))
}

/// A JSON object for a `google.protobuf.Struct` field.
pub(crate) fn to_struct(map: &Map<String, Value>) -> JsonStruct {
    JsonStruct(map.clone())
}

/// The JSON of a `Value` field; `None` when it had no kind (JavaScript's undefined).
pub(crate) fn from_value(value: JsonValue) -> Option<Value> {
    value.0
}

/// The JSON object of a `Struct` field.
pub(crate) fn from_struct(s: JsonStruct) -> Map<String, Value> {
    s.0
}

/// A double as JavaScript's JSON would write it: integral values as integers,
/// NaN and infinities (which JSON cannot carry) as `null`.
pub(crate) fn number(n: f64) -> Value {
    if !n.is_finite() {
        return Value::Null;
    }
    // Up to 2^53 a double holds every integer exactly; past it JavaScript prints
    // exponent forms, so such numbers stay doubles.
    if n.fract() == 0.0 && n.abs() <= 9_007_199_254_740_992.0 {
        #[allow(clippy::cast_possible_truncation)]
        return Value::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}
