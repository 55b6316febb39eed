//! `google.protobuf.Value` and `Struct`, read and written straight from and to
//! `serde_json` values (writing them is `proto/writer.rs`'s).
//!
//! The generated code uses these types in place of `prost-types` (see
//! `extern_path` in `tests/proto_codegen.rs`) for two reasons. Speed: state
//! snapshots are the largest payloads AG-UI carries, and building a
//! `prost_types::Value` tree first doubled the work. Fidelity: members are
//! written in the object's own key order — as the official encoder writes a
//! JavaScript object — so even events with open objects encode to the same bytes.

use bytes::{Buf, BufMut};
use prost::DecodeError;
use prost::encoding::{
    DecodeContext, WireType, decode_varint, encode_key, encode_varint, skip_field,
};
use serde_json::{Map, Number, Value};

use super::writer::{self, StructMessage, ValueMessage};

/// How deep `Struct`/`ListValue` nesting may go before decoding refuses: the
/// input is untrusted and each level is a stack frame.
const MAX_DEPTH: usize = 100;

/// A `google.protobuf.Value`. `None` is a value with no kind set (JavaScript's
/// `undefined`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsonValue(pub Option<Value>);

/// A `google.protobuf.Struct`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsonStruct(pub Map<String, Value>);

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

// prost 0.14 offers no other way for a hand-written `Message` to report a
// decode error; the lockfile pins prost, and 0.15 will need a look here.
#[allow(deprecated)]
fn err(what: &'static str) -> DecodeError {
    DecodeError::new(what)
}

/// A cursor over one message's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        decode_varint(&mut self.bytes)
    }

    fn key(&mut self) -> Result<(u32, u64), DecodeError> {
        let key = self.varint()?;
        let tag = u32::try_from(key >> 3).map_err(|_| err("invalid key"))?;
        if tag == 0 {
            return Err(err("invalid tag value: 0"));
        }
        Ok((tag, key & 7))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if len > self.bytes.len() {
            return Err(err("buffer underflow"));
        }
        let (head, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(head)
    }

    fn delimited(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = usize::try_from(self.varint()?).map_err(|_| err("length overflow"))?;
        self.take(len)
    }

    fn skip(&mut self, tag: u32, wire: u64, depth: usize) -> Result<(), DecodeError> {
        match wire {
            0 => {
                self.varint()?;
            }
            1 => {
                self.take(8)?;
            }
            2 => {
                self.delimited()?;
            }
            5 => {
                self.take(4)?;
            }
            3 => {
                if depth >= MAX_DEPTH {
                    return Err(err("recursion limit reached"));
                }
                loop {
                    let (inner, inner_wire) = self.key()?;
                    if inner_wire == 4 {
                        if inner != tag {
                            return Err(err("unexpected end group tag"));
                        }
                        break;
                    }
                    self.skip(inner, inner_wire, depth + 1)?;
                }
            }
            _ => return Err(err("invalid wire type")),
        }
        Ok(())
    }
}

fn string(bytes: &[u8]) -> Result<String, DecodeError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| err("invalid string value: data is not UTF-8 encoded"))
}

/// Merges one field of a `Value` message into `slot`.
fn merge_value_field(
    slot: &mut Option<Value>,
    tag: u32,
    wire: u64,
    r: &mut Reader<'_>,
    depth: usize,
) -> Result<(), DecodeError> {
    let wrong = || err("invalid wire type for a google.protobuf.Value field");
    match tag {
        1 => {
            if wire != 0 {
                return Err(wrong());
            }
            r.varint()?;
            *slot = Some(Value::Null);
        }
        2 => {
            if wire != 1 {
                return Err(wrong());
            }
            let b = r.take(8)?;
            let mut raw = [0u8; 8];
            raw.copy_from_slice(b);
            *slot = Some(number(f64::from_le_bytes(raw)));
        }
        3 => {
            if wire != 2 {
                return Err(wrong());
            }
            *slot = Some(Value::String(string(r.delimited()?)?));
        }
        4 => {
            if wire != 0 {
                return Err(wrong());
            }
            *slot = Some(Value::Bool(r.varint()? != 0));
        }
        5 => {
            if wire != 2 {
                return Err(wrong());
            }
            // A repeated message field merges into what is there.
            let mut map = match slot.take() {
                Some(Value::Object(map)) => map,
                _ => Map::new(),
            };
            merge_struct(&mut map, r.delimited()?, depth + 1)?;
            *slot = Some(Value::Object(map));
        }
        6 => {
            if wire != 2 {
                return Err(wrong());
            }
            let mut items = match slot.take() {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            };
            merge_list(&mut items, r.delimited()?, depth + 1)?;
            *slot = Some(Value::Array(items));
        }
        _ => r.skip(tag, wire, depth)?,
    }
    Ok(())
}

fn parse_value(bytes: &[u8], depth: usize) -> Result<Option<Value>, DecodeError> {
    if depth > MAX_DEPTH {
        return Err(err("recursion limit reached"));
    }
    let mut r = Reader { bytes };
    let mut slot = None;
    while !r.bytes.is_empty() {
        let (tag, wire) = r.key()?;
        merge_value_field(&mut slot, tag, wire, &mut r, depth)?;
    }
    Ok(slot)
}

fn merge_struct(
    map: &mut Map<String, Value>,
    bytes: &[u8],
    depth: usize,
) -> Result<(), DecodeError> {
    if depth > MAX_DEPTH {
        return Err(err("recursion limit reached"));
    }
    let mut r = Reader { bytes };
    while !r.bytes.is_empty() {
        let (tag, wire) = r.key()?;
        if tag != 1 || wire != 2 {
            r.skip(tag, wire, depth)?;
            continue;
        }
        let mut entry = Reader {
            bytes: r.delimited()?,
        };
        let mut key = String::new();
        let mut value: Option<Value> = None;
        while !entry.bytes.is_empty() {
            let (t, w) = entry.key()?;
            match (t, w) {
                (1, 2) => key = string(entry.delimited()?)?,
                (2, 2) => {
                    let payload = entry.delimited()?;
                    let mut r2 = Reader { bytes: payload };
                    if depth + 1 > MAX_DEPTH {
                        return Err(err("recursion limit reached"));
                    }
                    while !r2.bytes.is_empty() {
                        let (vt, vw) = r2.key()?;
                        merge_value_field(&mut value, vt, vw, &mut r2, depth + 1)?;
                    }
                }
                _ => entry.skip(t, w, depth)?,
            }
        }
        match value {
            Some(v) => {
                map.insert(key, v);
            }
            // A member with no value reads as JavaScript's undefined: absent.
            None => {
                map.shift_remove(&key);
            }
        }
    }
    Ok(())
}

fn merge_list(items: &mut Vec<Value>, bytes: &[u8], depth: usize) -> Result<(), DecodeError> {
    if depth > MAX_DEPTH {
        return Err(err("recursion limit reached"));
    }
    let mut r = Reader { bytes };
    while !r.bytes.is_empty() {
        let (tag, wire) = r.key()?;
        if tag != 1 || wire != 2 {
            r.skip(tag, wire, depth)?;
            continue;
        }
        // JSON writes an undefined array element as null.
        items.push(parse_value(r.delimited()?, depth + 1)?.unwrap_or(Value::Null));
    }
    Ok(())
}

fn wire_code(wire: WireType) -> u64 {
    wire as u64
}

/// Reads the payload of the current field as raw bytes for our own parser.
fn field_bytes(wire: WireType, buf: &mut impl Buf) -> Result<Vec<u8>, DecodeError> {
    let take = |buf: &mut dyn Buf, n: usize| -> Result<Vec<u8>, DecodeError> {
        if n > buf.remaining() {
            return Err(err("buffer underflow"));
        }
        let mut out = vec![0u8; n];
        buf.copy_to_slice(&mut out);
        Ok(out)
    };
    match wire {
        WireType::Varint => {
            let v = decode_varint(buf)?;
            let mut out = Vec::with_capacity(10);
            encode_varint(v, &mut out);
            Ok(out)
        }
        WireType::SixtyFourBit => take(buf, 8),
        WireType::ThirtyTwoBit => take(buf, 4),
        WireType::LengthDelimited => {
            let len = usize::try_from(decode_varint(buf)?).map_err(|_| err("length overflow"))?;
            let payload = take(buf, len)?;
            let mut out = Vec::with_capacity(len + 10);
            encode_varint(len as u64, &mut out);
            out.extend_from_slice(&payload);
            Ok(out)
        }
        WireType::StartGroup | WireType::EndGroup => {
            Err(err("groups are not supported in google.protobuf.Value"))
        }
    }
}

impl prost::Message for JsonValue {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if let Some(v) = &self.0 {
            let mut out = Vec::new();
            writer::encode(&mut out, &ValueMessage(v));
            buf.put_slice(&out);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        if !(1..=6).contains(&tag) {
            return skip_field(wire_type, tag, buf, ctx);
        }
        let bytes = field_bytes(wire_type, buf)?;
        let mut r = Reader { bytes: &bytes };
        merge_value_field(&mut self.0, tag, wire_code(wire_type), &mut r, 1)
    }

    fn encoded_len(&self) -> usize {
        self.0
            .as_ref()
            .map_or(0, |v| writer::encoded_len(&ValueMessage(v)))
    }

    fn clear(&mut self) {
        self.0 = None;
    }
}

impl prost::Message for JsonStruct {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        let mut out = Vec::new();
        writer::encode(&mut out, &StructMessage(&self.0));
        buf.put_slice(&out);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        if tag != 1 || wire_type != WireType::LengthDelimited {
            return skip_field(wire_type, tag, buf, ctx);
        }
        let bytes = field_bytes(wire_type, buf)?;
        // Re-frame the one entry as a struct of one field for the shared parser.
        let mut framed = Vec::with_capacity(bytes.len() + 1);
        encode_key(1, WireType::LengthDelimited, &mut framed);
        framed.extend_from_slice(&bytes);
        merge_struct(&mut self.0, &framed, 1)
    }

    fn encoded_len(&self) -> usize {
        writer::encoded_len(&StructMessage(&self.0))
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;
    use serde_json::json;

    #[test]
    fn round_trips_and_matches_prost_types() {
        let v = json!({"a": [1, 2.5, null, "x", true, {"b": {}}], "": "empty key", "z": -0.0});
        let ours = JsonValue(Some(v.clone())).encode_to_vec();
        assert_eq!(ours.len(), JsonValue(Some(v)).encoded_len());
        let back = JsonValue::decode(&ours[..]).unwrap();
        assert_eq!(
            back.0,
            Some(json!({"a": [1, 2.5, null, "x", true, {"b": {}}], "": "empty key", "z": 0}))
        );
        // same wire as prost-types' own Value, member order aside (BTreeMap sorts)
        let sorted = json!({"": "empty key", "a": [1, 2.5, null, "x", true, {"b": {}}]});
        let reference =
            prost_types::Value::decode(&JsonValue(Some(sorted.clone())).encode_to_vec()[..])
                .unwrap();
        assert_eq!(
            reference.encode_to_vec(),
            JsonValue(Some(sorted)).encode_to_vec()
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let mut v = json!(1);
        for _ in 0..120 {
            v = json!([v]);
        }
        let bytes = JsonValue(Some(v)).encode_to_vec();
        assert!(JsonValue::decode(&bytes[..]).is_err());
    }
}
