//! RFC 6902 JSON Patch operations as AG-UI carries them, and atomic application.
//!
//! Operations are open objects: RFC 6902 says members an operation does not
//! define are ignored, so they are kept (in [`PatchOperation::extra`]) and
//! re-emitted, never stripped.

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

mod diff;
pub(crate) mod reference;

pub use diff::diff;

use crate::decode::{AnyJson, Cx, DResult, Decode, Fail, Obj, Path, expected, tag};

/// A JSON Patch document.
pub type JsonPatch = Vec<PatchOperation>;

/// One JSON Patch operation.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchOperation {
    /// The operation and its operands.
    pub op: PatchOp,
    /// Members the operation does not define, preserved as RFC 6902 requires.
    pub extra: Map<String, Value>,
}

/// The six RFC 6902 operations.
#[derive(Debug, Clone, PartialEq)]
pub enum PatchOp {
    /// Insert or set `value` at `path`.
    Add {
        /// Target pointer.
        path: String,
        /// The value.
        value: Value,
    },
    /// Remove what is at `path`.
    Remove {
        /// Target pointer.
        path: String,
    },
    /// Replace what is at `path`.
    Replace {
        /// Target pointer.
        path: String,
        /// The value.
        value: Value,
    },
    /// Move `from` to `path`.
    Move {
        /// Source pointer.
        from: String,
        /// Target pointer.
        path: String,
    },
    /// Copy `from` to `path`.
    Copy {
        /// Source pointer.
        from: String,
        /// Target pointer.
        path: String,
    },
    /// Assert that `path` equals `value`.
    Test {
        /// Target pointer.
        path: String,
        /// The expected value.
        value: Value,
    },
}

impl PatchOperation {
    /// An operation with no extra members.
    pub fn new(op: PatchOp) -> Self {
        Self {
            op,
            extra: Map::new(),
        }
    }

    /// `add` at `path`.
    pub fn add(path: impl Into<String>, value: Value) -> Self {
        Self::new(PatchOp::Add {
            path: path.into(),
            value,
        })
    }

    /// `replace` at `path`.
    pub fn replace(path: impl Into<String>, value: Value) -> Self {
        Self::new(PatchOp::Replace {
            path: path.into(),
            value,
        })
    }

    /// `remove` at `path`.
    pub fn remove(path: impl Into<String>) -> Self {
        Self::new(PatchOp::Remove { path: path.into() })
    }

    /// The `op` name.
    pub fn name(&self) -> &'static str {
        match self.op {
            PatchOp::Add { .. } => "add",
            PatchOp::Remove { .. } => "remove",
            PatchOp::Replace { .. } => "replace",
            PatchOp::Move { .. } => "move",
            PatchOp::Copy { .. } => "copy",
            PatchOp::Test { .. } => "test",
        }
    }

    /// The target pointer.
    pub fn path(&self) -> &str {
        match &self.op {
            PatchOp::Add { path, .. }
            | PatchOp::Remove { path }
            | PatchOp::Replace { path, .. }
            | PatchOp::Move { path, .. }
            | PatchOp::Copy { path, .. }
            | PatchOp::Test { path, .. } => path,
        }
    }
}

impl Serialize for PatchOperation {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("op", self.name())?;
        match &self.op {
            PatchOp::Add { path, value }
            | PatchOp::Replace { path, value }
            | PatchOp::Test { path, value } => {
                map.serialize_entry("path", path)?;
                map.serialize_entry("value", value)?;
            }
            PatchOp::Remove { path } => map.serialize_entry("path", path)?,
            PatchOp::Move { from, path } | PatchOp::Copy { from, path } => {
                map.serialize_entry("from", from)?;
                map.serialize_entry("path", path)?;
            }
        }
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Whether `s` is an RFC 6901 pointer (`^(/([^/~]|~[01])*)*$`).
pub fn is_json_pointer(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    if !s.starts_with('/') {
        return false;
    }
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'~' {
            match bytes.get(i + 1) {
                Some(b'0' | b'1') => i += 2,
                _ => return false,
            }
        } else {
            i += 1;
        }
    }
    true
}

struct Pointer(String);

impl Decode for Pointer {
    const EXPECTED: &'static str = "string";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let s = String::decode(value, cx, path)?;
        if !is_json_pointer(&s) {
            return Err(cx.error(
                path,
                "Invalid string: must match pattern /^(\\/([^\\/~]|~[01])*)*$/",
            ));
        }
        Ok(Pointer(s))
    }
}

impl Decode for PatchOperation {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let Value::Object(map) = value else {
            return Err(cx.error(path, expected("object", &value)));
        };
        let kind = match tag(&map, "op") {
            Some("add") => 0,
            Some("remove") => 1,
            Some("replace") => 2,
            Some("move") => 3,
            Some("copy") => 4,
            Some("test") => 5,
            _ => return Err(Fail::Drop { tag: "op" }),
        };
        let mut o = Obj::from_map(map, cx, path);
        o.take("op");
        let op = match kind {
            0 => PatchOp::Add {
                path: o.req::<Pointer>(cx, "path")?.0,
                value: o.req::<AnyJson>(cx, "value")?.0,
            },
            1 => PatchOp::Remove {
                path: o.req::<Pointer>(cx, "path")?.0,
            },
            2 => PatchOp::Replace {
                path: o.req::<Pointer>(cx, "path")?.0,
                value: o.req::<AnyJson>(cx, "value")?.0,
            },
            3 => PatchOp::Move {
                from: o.req::<Pointer>(cx, "from")?.0,
                path: o.req::<Pointer>(cx, "path")?.0,
            },
            4 => PatchOp::Copy {
                from: o.req::<Pointer>(cx, "from")?.0,
                path: o.req::<Pointer>(cx, "path")?.0,
            },
            _ => PatchOp::Test {
                path: o.req::<Pointer>(cx, "path")?.0,
                value: o.req::<AnyJson>(cx, "value")?.0,
            },
        };
        Ok(PatchOperation {
            op,
            extra: o.rest(),
        })
    }
}

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

/// Applies `patch` to `doc` atomically: on failure `doc` is left exactly as it
/// was. The semantics are those of the official client's JSON Patch library
/// (`fast-json-patch` with validation), quirks included, so a state folded here
/// equals the state folded there.
pub fn apply_patch(doc: &mut Value, patch: &[PatchOperation]) -> Result<(), PatchError> {
    match patch_like_reference(doc, patch)? {
        Patched::Document => Ok(()),
        Patched::Undefined => Err(PatchError(
            "the patch leaves no document (a move or copy onto the root from a missing path)"
                .into(),
        )),
    }
}

/// Applies a JSON Patch atomically, exactly as the reference client does
/// (`fast-json-patch` 3.1.1, `applyPatch(doc, ops, validate = true, mutate = false)`).
/// On failure `doc` is left as it was and the error reads like that library's.
///
/// A patch can leave the library holding `undefined` (a `move` or `copy` onto
/// the root from a path that does not exist): that is reported as
/// [`Patched::Undefined`], with `doc` left as it was.
pub(crate) fn patch_like_reference(
    doc: &mut Value,
    ops: &[PatchOperation],
) -> Result<Patched, PatchError> {
    crate::patch::reference::apply(doc, ops).map_err(PatchError)
}

/// How a patch the reference client accepts ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Patched {
    /// The document is the patched one.
    Document,
    /// The reference client is left holding `undefined`.
    Undefined,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointer_grammar() {
        assert!(is_json_pointer(""));
        assert!(is_json_pointer("/a/~0/~1/0"));
        assert!(!is_json_pointer("a"));
        assert!(!is_json_pointer("/a~2b"));
        assert!(!is_json_pointer("/a~"));
    }

    #[test]
    fn a_failing_move_after_a_change_rolls_back() {
        // json-patch 5.0 panics in its undo on exactly this patch (a move that
        // fails after removing its source); the reference model rolls back.
        let mut doc = json!({"c": [1, 2]});
        let patch = vec![
            PatchOperation::add("/c/0", json!(0)),
            PatchOperation::new(PatchOp::Move {
                from: "/c".into(),
                path: "/x/0/b".into(),
            }),
        ];
        assert!(apply_patch(&mut doc, &patch).is_err());
        assert_eq!(doc, json!({"c": [1, 2]}));
    }

    #[test]
    fn failed_patch_leaves_document_unchanged() {
        let mut doc = json!({"a": 1});
        let patch = vec![
            PatchOperation::replace("/a", json!(2)),
            PatchOperation::remove("/missing"),
        ];
        assert!(apply_patch(&mut doc, &patch).is_err());
        assert_eq!(doc, json!({"a": 1}));
    }
}
