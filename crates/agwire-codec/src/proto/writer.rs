//! The protobuf writer: two passes over one message, with the same code.
//!
//! A nested message is written as its length and then its fields, so the
//! length has to be known first. Asking each level for it walks every subtree
//! once per enclosing level (prost's way: a 50 KB state snapshot inside an
//! event was walked four times, after being copied into prost's tree).
//! Instead, everything that writes a message is a function generic over
//! [`Pass`] and runs twice: [`Measure`] records the length of every nested
//! message in the order it meets them (pre-order), [`Write`] writes and reads
//! the lengths back in the same order. Both passes run the same function, so
//! they cannot disagree about what is nested where.

use serde_json::{Map, Value};

/// One pass over a message: measuring or writing.
pub(crate) trait Pass {
    /// A varint field (`int64`, `bool`, an enum).
    fn varint(&mut self, field: u32, value: u64);
    /// A `double` field.
    fn double(&mut self, field: u32, value: f64);
    /// A length-delimited field of raw bytes (`string`, `bytes`).
    fn bytes(&mut self, field: u32, value: &[u8]);
    /// A message field whose fields `fields` writes; its length is measured.
    fn message(&mut self, field: u32, fields: impl FnOnce(&mut Self));
    /// A message field whose length `len` the caller already knows (small
    /// leaves), so the measuring pass need not record it.
    fn sized_message(&mut self, field: u32, len: usize, fields: impl FnOnce(&mut Self));
}

/// The encoded length of a varint.
#[inline]
pub(crate) fn varint_len(value: u64) -> usize {
    // 1 byte per 7 bits, at least one byte.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn key_len(field: u32) -> usize {
    varint_len(u64::from(field) << 3)
}

/// The encoded length of a length-delimited field with `len` bytes of payload.
#[inline]
fn delimited_len(field: u32, len: usize) -> usize {
    key_len(field) + varint_len(len as u64) + len
}

/// The measuring pass: the total length, and each nested message's length in
/// pre-order.
#[derive(Debug, Default)]
pub(crate) struct Measure {
    pub(crate) len: usize,
    pub(crate) lens: Vec<usize>,
}

impl Pass for Measure {
    #[inline]
    fn varint(&mut self, field: u32, value: u64) {
        self.len += key_len(field) + varint_len(value);
    }

    #[inline]
    fn double(&mut self, field: u32, _: f64) {
        self.len += key_len(field) + 8;
    }

    #[inline]
    fn bytes(&mut self, field: u32, value: &[u8]) {
        self.len += delimited_len(field, value.len());
    }

    #[inline]
    fn message(&mut self, field: u32, fields: impl FnOnce(&mut Self)) {
        let slot = self.lens.len();
        self.lens.push(0);
        let start = self.len;
        fields(self);
        let inner = self.len - start;
        self.lens[slot] = inner;
        self.len += key_len(field) + varint_len(inner as u64);
    }

    #[inline]
    fn sized_message(&mut self, field: u32, len: usize, _: impl FnOnce(&mut Self)) {
        self.len += delimited_len(field, len);
    }
}

/// The writing pass, reading back what [`Measure`] recorded.
#[derive(Debug)]
pub(crate) struct Write<'a> {
    out: &'a mut Vec<u8>,
    lens: std::slice::Iter<'a, usize>,
}

impl<'a> Write<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>, lens: &'a [usize]) -> Self {
        Self {
            out,
            lens: lens.iter(),
        }
    }

    /// Whether every recorded length was used: the passes agreed.
    pub(crate) fn finished(&self) -> bool {
        self.lens.len() == 0
    }

    #[inline]
    fn raw_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            // Truncation is the point: the low 7 bits, with the continuation bit.
            #[allow(clippy::cast_possible_truncation)]
            self.out.push((value as u8) | 0x80);
            value >>= 7;
        }
        #[allow(clippy::cast_possible_truncation)]
        self.out.push(value as u8);
    }

    #[inline]
    fn key(&mut self, field: u32, wire_type: u32) {
        self.raw_varint(u64::from((field << 3) | wire_type));
    }
}

impl Pass for Write<'_> {
    #[inline]
    fn varint(&mut self, field: u32, value: u64) {
        self.key(field, 0);
        self.raw_varint(value);
    }

    #[inline]
    fn double(&mut self, field: u32, value: f64) {
        self.key(field, 1);
        self.out.extend_from_slice(&value.to_le_bytes());
    }

    #[inline]
    fn bytes(&mut self, field: u32, value: &[u8]) {
        self.key(field, 2);
        self.raw_varint(value.len() as u64);
        self.out.extend_from_slice(value);
    }

    #[inline]
    fn message(&mut self, field: u32, fields: impl FnOnce(&mut Self)) {
        self.key(field, 2);
        let len = self.lens.next().copied().unwrap_or(0);
        self.raw_varint(len as u64);
        fields(self);
    }

    #[inline]
    fn sized_message(&mut self, field: u32, len: usize, fields: impl FnOnce(&mut Self)) {
        self.key(field, 2);
        self.raw_varint(len as u64);
        fields(self);
    }
}

/// A message: something that writes its fields in either pass.
pub(crate) trait Fields {
    /// Writes (or measures) the fields, in field-number order.
    fn fields<P: Pass>(&self, p: &mut P);
}

/// Measures then writes `message`'s fields into `out` (no length prefix);
/// returns the number of bytes written.
pub(crate) fn encode(out: &mut Vec<u8>, message: &impl Fields) -> usize {
    let mut measure = Measure::default();
    message.fields(&mut measure);
    out.reserve(measure.len);
    let start = out.len();
    let mut write = Write::new(out, &measure.lens);
    message.fields(&mut write);
    debug_assert!(write.finished(), "the passes disagree");
    let written = out.len() - start;
    debug_assert_eq!(written, measure.len, "the passes disagree");
    written
}

/// The encoded length of `message`'s fields.
pub(crate) fn encoded_len(message: &impl Fields) -> usize {
    let mut measure = Measure::default();
    message.fields(&mut measure);
    measure.len
}

/// A `google.protobuf.Value` as a message of its own.
pub(crate) struct ValueMessage<'a>(pub(crate) &'a Value);

impl Fields for ValueMessage<'_> {
    fn fields<P: Pass>(&self, p: &mut P) {
        value(p, self.0);
    }
}

/// A `google.protobuf.Struct` as a message of its own.
pub(crate) struct StructMessage<'a>(pub(crate) &'a Map<String, Value>);

impl Fields for StructMessage<'_> {
    fn fields<P: Pass>(&self, p: &mut P) {
        struct_fields(p, self.0);
    }
}

/// The encoded length of a `Value`'s fields when it is a leaf: no nested
/// message, so nothing to record.
#[inline]
fn leaf_len(v: &Value) -> Option<usize> {
    match v {
        Value::Null | Value::Bool(_) => Some(2),
        Value::Number(_) => Some(9),
        Value::String(s) => Some(delimited_len(3, s.len())),
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// The fields of a `google.protobuf.Value`.
pub(crate) fn value<P: Pass>(p: &mut P, v: &Value) {
    match v {
        // `NullValue.NULL_VALUE` is 0, and a oneof member is written even when
        // it holds its default.
        Value::Null => p.varint(1, 0),
        Value::Number(n) => p.double(2, n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => p.bytes(3, s.as_bytes()),
        Value::Bool(b) => p.varint(4, u64::from(*b)),
        Value::Object(map) => p.message(5, |p| struct_fields(p, map)),
        Value::Array(items) => p.message(6, |p| {
            for item in items {
                value_field(p, 1, item);
            }
        }),
    }
}

/// A `google.protobuf.Value` field.
#[inline]
pub(crate) fn value_field<P: Pass>(p: &mut P, field: u32, v: &Value) {
    match leaf_len(v) {
        Some(len) => p.sized_message(field, len, |p| value(p, v)),
        None => p.message(field, |p| value(p, v)),
    }
}

/// A `google.protobuf.Value` field holding an object.
pub(crate) fn object_value_field<P: Pass>(p: &mut P, field: u32, map: &Map<String, Value>) {
    p.message(field, |p| p.message(5, |p| struct_fields(p, map)));
}

/// A `google.protobuf.Struct` field.
pub(crate) fn struct_field<P: Pass>(p: &mut P, field: u32, map: &Map<String, Value>) {
    p.message(field, |p| struct_fields(p, map));
}

/// The fields of a `google.protobuf.Struct`: one map entry per member, in the
/// object's own order (as the official encoder writes a JavaScript object).
pub(crate) fn struct_fields<P: Pass>(p: &mut P, map: &Map<String, Value>) {
    for (key, v) in map {
        let entry = |p: &mut P| {
            // An empty key is proto3's default and is not written.
            if !key.is_empty() {
                p.bytes(1, key.as_bytes());
            }
            value_field(p, 2, v);
        };
        match leaf_len(v) {
            Some(len) => {
                let key_len = if key.is_empty() {
                    0
                } else {
                    delimited_len(1, key.len())
                };
                p.sized_message(1, key_len + delimited_len(2, len), entry);
            }
            None => p.message(1, entry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_lengths() {
        for (value, len) in [
            (0u64, 1),
            (1, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (u64::from(u32::MAX), 5),
            (u64::MAX, 10),
        ] {
            assert_eq!(varint_len(value), len, "{value}");
            let mut out = Vec::new();
            let mut w = Write::new(&mut out, &[]);
            w.raw_varint(value);
            assert_eq!(out.len(), len, "{value}");
        }
    }
}
