//! Computing a JSON Patch that turns one document into another.

use serde_json::Value;

use super::PatchOperation;

/// The operations that turn `from` into `to`, for a producer that keeps its
/// state whole and wants to send `STATE_DELTA` instead of a snapshot.
///
/// Objects are compared member by member and arrays element by element (a
/// grown array gets `add`s at its end, a shrunk one `remove`s from its end), so
/// a small change to a large state is a small patch. Anything else that differs
/// is one `replace`. Applying the result to `from` with
/// [`apply_patch`](super::apply_patch) yields `to`; equal documents give an
/// empty patch.
///
/// ```
/// use agwire_core::patch::{apply_patch, diff};
/// let before = serde_json::json!({"steps": [{"status": "pending"}], "title": "a/b"});
/// let after = serde_json::json!({"steps": [{"status": "done"}, {"status": "pending"}]});
/// let patch = diff(&before, &after);
/// let mut doc = before.clone();
/// apply_patch(&mut doc, &patch).unwrap();
/// assert_eq!(doc, after);
/// ```
pub fn diff(from: &Value, to: &Value) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    let mut path = String::new();
    walk(from, to, &mut path, &mut ops);
    ops
}

fn walk(from: &Value, to: &Value, path: &mut String, ops: &mut Vec<PatchOperation>) {
    if from == to {
        return;
    }
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().filter(|k| !b.contains_key(*k)) {
                with_segment(path, key, |p| ops.push(PatchOperation::remove(p.as_str())));
            }
            for (key, new) in b {
                with_segment(path, key, |p| match a.get(key) {
                    Some(old) => walk(old, new, p, ops),
                    None => ops.push(PatchOperation::add(p.as_str(), new.clone())),
                });
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let common = a.len().min(b.len());
            for (i, (old, new)) in a.iter().zip(b).enumerate() {
                with_segment(path, &i.to_string(), |p| walk(old, new, p, ops));
            }
            // Removing from the end keeps every earlier index valid.
            for i in (common..a.len()).rev() {
                with_segment(path, &i.to_string(), |p| {
                    ops.push(PatchOperation::remove(p.as_str()));
                });
            }
            for (i, new) in b.iter().enumerate().skip(common) {
                with_segment(path, &i.to_string(), |p| {
                    ops.push(PatchOperation::add(p.as_str(), new.clone()));
                });
            }
        }
        _ => ops.push(PatchOperation::replace(path.as_str(), to.clone())),
    }
}

/// Runs `f` with `segment` appended to `path` (escaped per RFC 6901), then
/// restores `path`, so one buffer serves the whole walk.
fn with_segment(path: &mut String, segment: &str, f: impl FnOnce(&mut String)) {
    let len = path.len();
    path.push('/');
    for c in segment.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
    f(path);
    path.truncate(len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::{PatchOp, apply_patch};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::{Map, json};

    fn random_value(rng: &mut StdRng, depth: u32) -> Value {
        let pick = if depth == 0 {
            rng.random_range(0..4)
        } else {
            rng.random_range(0..6)
        };
        match pick {
            0 => Value::Null,
            1 => json!(rng.random_range(0..4)),
            2 => json!(["x", "a/b", "t~1", ""][rng.random_range(0..4)]),
            3 => json!(rng.random_bool(0.5)),
            4 => Value::Array(
                (0..rng.random_range(0..4))
                    .map(|_| random_value(rng, depth - 1))
                    .collect(),
            ),
            _ => {
                let mut m = Map::new();
                for _ in 0..rng.random_range(0..4) {
                    let key = ["a", "b", "c/d", "e~f", ""][rng.random_range(0..5)];
                    m.insert(key.to_owned(), random_value(rng, depth - 1));
                }
                Value::Object(m)
            }
        }
    }

    #[test]
    fn applying_the_diff_reaches_the_target() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..20_000 {
            let a = random_value(&mut rng, 3);
            let b = random_value(&mut rng, 3);
            let patch = diff(&a, &b);
            let mut doc = a.clone();
            apply_patch(&mut doc, &patch).unwrap_or_else(|e| panic!("{a} -> {b}: {e}"));
            assert_eq!(doc, b, "{a} -> {b} via {patch:?}");
            assert!(diff(&b, &b).is_empty());
        }
    }

    #[test]
    fn a_small_change_is_a_small_patch() {
        let before = json!({"steps": [{"d": "one", "status": "pending"}, {"d": "two", "status": "pending"}]});
        let mut after = before.clone();
        after["steps"][1]["status"] = json!("completed");
        let patch = diff(&before, &after);
        assert_eq!(patch.len(), 1);
        assert!(matches!(&patch[0].op, PatchOp::Replace { path, .. } if path == "/steps/1/status"));
    }
}
