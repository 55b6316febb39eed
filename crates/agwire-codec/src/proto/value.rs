//! JSON ↔ the `Value`/`Struct` fields of the generated code.

use serde_json::{Map, Value};

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
