//! A literal model of the JSON Patch the reference client applies:
//! `fast-json-patch` 3.1.1's `applyPatch` with validation on, running in a
//! JavaScript engine.
//!
//! It departs from RFC 6902 in ways that change the resulting document, and a
//! consumer that must agree with the reference client has to depart the same
//! way: removing the root leaves `null`; `move` and `copy` onto an array index
//! past the end append; an array index may carry leading zeros when adding
//! (`/list/01`); an operation on a primitive root silently changes nothing;
//! inherited property names (`toString`, `length`, …) exist for lookups;
//! `__proto__` and `constructor/prototype` are refused; a `move` whose source
//! is a non-numeric array key removes the array's first element; numbers
//! compare by value (`1 == 1.0`). Indices at or beyond 2^31, where the library
//! wraps around, and moves of inherited properties (functions) are refused
//! instead of imitated.
//!
//! The library patches a deep copy; this patches in place and keeps an undo
//! log, so a failed patch costs what it changed rather than a copy of the state.

use std::borrow::Cow;

use serde_json::Value;

use crate::patch::{PatchOp, PatchOperation};

const BANNED: &str = "JSON-Patch: modifying `__proto__` or `constructor/prototype` prop is banned for security reasons, if this was on purpose, please set `banPrototypeModifications` flag false and pass it to this function. More info in fast-json-patch README";

/// Names every JavaScript value inherits from `Object.prototype`.
const OBJECT_PROTO: &[&str] = &[
    "constructor",
    "__defineGetter__",
    "__defineSetter__",
    "hasOwnProperty",
    "__lookupGetter__",
    "__lookupSetter__",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toString",
    "valueOf",
    "__proto__",
    "toLocaleString",
];
const ARRAY_PROTO: &[&str] = &[
    "at",
    "concat",
    "copyWithin",
    "entries",
    "every",
    "fill",
    "filter",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "flat",
    "flatMap",
    "forEach",
    "includes",
    "indexOf",
    "join",
    "keys",
    "lastIndexOf",
    "map",
    "pop",
    "push",
    "reduce",
    "reduceRight",
    "reverse",
    "shift",
    "slice",
    "some",
    "sort",
    "splice",
    "toReversed",
    "toSorted",
    "toSpliced",
    "unshift",
    "values",
    "with",
];
const STRING_PROTO: &[&str] = &[
    "anchor",
    "at",
    "big",
    "blink",
    "bold",
    "charAt",
    "charCodeAt",
    "codePointAt",
    "concat",
    "endsWith",
    "fontcolor",
    "fontsize",
    "fixed",
    "includes",
    "indexOf",
    "isWellFormed",
    "italics",
    "lastIndexOf",
    "link",
    "localeCompare",
    "match",
    "matchAll",
    "normalize",
    "padEnd",
    "padStart",
    "repeat",
    "replace",
    "replaceAll",
    "search",
    "slice",
    "small",
    "split",
    "strike",
    "sub",
    "substr",
    "substring",
    "sup",
    "startsWith",
    "toWellFormed",
    "trim",
    "trimStart",
    "trimLeft",
    "trimEnd",
    "trimRight",
    "toLocaleLowerCase",
    "toLocaleUpperCase",
    "toLowerCase",
    "toUpperCase",
];
const NUMBER_PROTO: &[&str] = &["toExponential", "toFixed", "toPrecision"];

/// Why an operation failed: the library's `JsonPatchError` (message, name,
/// and the index it reports), or an engine `TypeError`.
#[derive(Debug)]
enum Failure {
    Patch {
        message: &'static str,
        name: &'static str,
        index: usize,
    },
    Type(String),
}

impl Failure {
    fn patch(message: &'static str, name: &'static str, index: usize) -> Self {
        Failure::Patch {
            message,
            name,
            index,
        }
    }

    fn unresolvable(index: usize) -> Self {
        Self::patch(
            "Cannot perform the operation at a path that does not exist",
            "OPERATION_PATH_UNRESOLVABLE",
            index,
        )
    }

    fn undefined(key: &str) -> Self {
        Failure::Type(format!(
            "Cannot read properties of undefined (reading '{key}')"
        ))
    }

    /// The message as the library formats it.
    fn describe(self, op: &PatchOperation, tree: Option<&Value>) -> String {
        match self {
            Failure::Type(message) => message,
            Failure::Patch {
                message,
                name,
                index,
            } => {
                let mut text = format!(
                    "{message}\nname: {name}\nindex: {index}\noperation: {}",
                    pretty(op)
                );
                match tree {
                    // The library prints a string tree bare, not as JSON.
                    Some(Value::String(tree)) => text.push_str(&format!("\ntree: {tree}")),
                    Some(tree) => text.push_str(&format!("\ntree: {}", pretty(tree))),
                    None => {}
                }
                text
            }
        }
    }
}

/// One step from a container to a member.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// The last key of a path, as the library resolves it against its parent.
#[derive(Debug)]
enum Last {
    /// A member of an object, or a property of a primitive root.
    Key(String),
    /// An array element (or the end of the array).
    Index(usize),
    /// A non-index property of an array: invisible in JSON.
    ArrayProperty(String),
}

/// Where an operation lands: the steps to the parent, then the last key.
#[derive(Debug)]
struct Target {
    parent: Vec<Step>,
    last: Last,
}

/// A value read the way JavaScript reads a property.
#[derive(Debug)]
enum Prop<'a> {
    Undefined,
    /// A method inherited from a prototype.
    Function,
    Json(Cow<'a, Value>),
}

/// What the library would store: JSON, or something `JSON.stringify` drops.
#[derive(Debug)]
enum Stored {
    Json(Value),
    /// `undefined` or a function: omitted from objects, `null` in arrays.
    Invisible,
}

impl Prop<'_> {
    fn stored(self) -> Stored {
        match self {
            Prop::Json(value) => Stored::Json(value.into_owned()),
            Prop::Undefined | Prop::Function => Stored::Invisible,
        }
    }
}

/// One reversible change, recorded so a failed patch can be undone.
#[derive(Debug)]
enum Undo {
    Root(Value),
    Set {
        parent: Vec<Step>,
        key: String,
        old: Option<Value>,
    },
    Deleted {
        parent: Vec<Step>,
        key: String,
        position: usize,
        old: Value,
    },
    Inserted {
        parent: Vec<Step>,
        at: usize,
    },
    Spliced {
        parent: Vec<Step>,
        at: usize,
        old: Value,
    },
    Replaced {
        parent: Vec<Step>,
        at: usize,
        old: Value,
    },
}

#[derive(Debug, Clone, Copy)]
enum Kind<'a> {
    Add(&'a Value),
    Remove,
    Replace(&'a Value),
    Move(&'a str),
    Copy(&'a str),
    Test(&'a Value),
    /// The library's internal read, used to check a `from`.
    Get,
}

pub(crate) fn apply(doc: &mut Value, ops: &[PatchOperation]) -> Result<super::Patched, String> {
    let mut log = Vec::new();
    // A `move` or `copy` onto the root from a missing source leaves the
    // library holding `undefined`, which only a later root write repairs.
    let mut undefined = false;
    for (index, op) in ops.iter().enumerate() {
        let outcome = if undefined {
            apply_to_undefined(doc, op, index, &mut log, &mut undefined)
        } else {
            apply_op(doc, op, index, &mut log, &mut undefined)
        };
        if let Err(failure) = outcome {
            let message = if matches!(failure, Failure::Patch { .. }) && contains_self(doc) {
                // The library's error message includes the document, and
                // printing one nested in itself throws instead.
                "Converting circular structure to JSON".to_owned()
            } else {
                failure.describe(op, (!undefined).then_some(&*doc))
            };
            undo(doc, log);
            return Err(message);
        }
    }
    if undefined {
        undo(doc, log);
        return Ok(super::Patched::Undefined);
    }
    let nested = ops.iter().any(
        |op| matches!(&op.op, PatchOp::Move { from, path } if from.is_empty() && !path.is_empty()),
    );
    if nested && contains_self(doc) {
        undo(doc, log);
        return Err("The patch nests the document inside itself".to_owned());
    }
    Ok(super::Patched::Document)
}

/// Marks where the library would have nested the document inside itself.
const SELF: &str = "\u{0}agwire:document-nested-in-itself\u{0}";

fn contains_self(value: &Value) -> bool {
    match value {
        Value::String(s) => s == SELF,
        Value::Array(items) => items.iter().any(contains_self),
        Value::Object(members) => members.values().any(contains_self),
        _ => false,
    }
}

fn apply_to_undefined(
    doc: &mut Value,
    op: &PatchOperation,
    index: usize,
    log: &mut Vec<Undo>,
    undefined: &mut bool,
) -> Result<(), Failure> {
    let replacement = match &op.op {
        PatchOp::Add { path, value } | PatchOp::Replace { path, value } if path.is_empty() => {
            value.clone()
        }
        PatchOp::Remove { path } if path.is_empty() => Value::Null,
        PatchOp::Test { path, .. } if path.is_empty() => {
            return Err(Failure::patch(
                "Test operation failed",
                "TEST_OPERATION_FAILED",
                index,
            ));
        }
        PatchOp::Move { from, path } | PatchOp::Copy { from, path }
            if path.is_empty() && from.is_empty() =>
        {
            return Ok(());
        }
        PatchOp::Move { from, path } | PatchOp::Copy { from, path } if path.is_empty() => {
            return Err(Failure::undefined(
                from.split('/').nth(1).unwrap_or_default(),
            ));
        }
        _ => {
            return Err(Failure::undefined(
                op.path().split('/').nth(1).unwrap_or_default(),
            ));
        }
    };
    log.push(Undo::Root(std::mem::replace(doc, replacement)));
    *undefined = false;
    Ok(())
}

fn apply_op(
    doc: &mut Value,
    op: &PatchOperation,
    index: usize,
    log: &mut Vec<Undo>,
    undefined: &mut bool,
) -> Result<(), Failure> {
    let (kind, path) = match &op.op {
        PatchOp::Add { path, value } => (Kind::Add(value), path),
        PatchOp::Remove { path } => (Kind::Remove, path),
        PatchOp::Replace { path, value } => (Kind::Replace(value), path),
        PatchOp::Move { from, path } => (Kind::Move(from), path),
        PatchOp::Copy { from, path } => (Kind::Copy(from), path),
        PatchOp::Test { path, value } => (Kind::Test(value), path),
    };
    if path.is_empty() {
        return apply_at_root(doc, kind, index, log, undefined);
    }
    let target = locate(doc, path, kind, index)?;
    match kind {
        Kind::Add(value) => {
            insert(doc, &target, Stored::Json(value.clone()), log);
            Ok(())
        }
        Kind::Replace(value) => {
            store(doc, &target, Stored::Json(value.clone()), log);
            Ok(())
        }
        Kind::Remove => {
            take(doc, &target, log);
            Ok(())
        }
        Kind::Test(value) => {
            let parent =
                resolve(doc, &target.parent).ok_or_else(|| Failure::unresolvable(index))?;
            let found = match &target.last {
                Last::Index(at) => match parent {
                    Value::Array(items) => items
                        .get(*at)
                        .map_or(Prop::Undefined, |v| Prop::Json(Cow::Borrowed(v))),
                    _ => Prop::Undefined,
                },
                Last::Key(key) | Last::ArrayProperty(key) => read(parent, key)?,
            };
            match found {
                Prop::Json(found) if equal(&found, value) => Ok(()),
                _ => Err(Failure::patch(
                    "Test operation failed",
                    "TEST_OPERATION_FAILED",
                    index,
                )),
            }
        }
        Kind::Move(from) => {
            if from.is_empty() {
                // The library nests the document inside itself. A marker
                // stands in for the loop; the patch fails if a later
                // operation does not overwrite it.
                return if matches!(doc, Value::Object(_) | Value::Array(_)) {
                    add_unchecked(doc, path, Stored::Json(Value::String(SELF.to_owned())), log)
                } else {
                    Ok(())
                };
            }
            let moved = remove_unchecked(doc, from, log)?;
            add_unchecked(doc, path, moved, log)
        }
        Kind::Copy(from) => {
            // The library clones the source first, turning `undefined` into `null`.
            let copied = match get_unchecked(doc, from)? {
                Prop::Undefined => Stored::Json(Value::Null),
                prop => prop.stored(),
            };
            add_unchecked(doc, path, copied, log)
        }
        Kind::Get => Ok(()),
    }
}

fn apply_at_root(
    doc: &mut Value,
    kind: Kind<'_>,
    index: usize,
    log: &mut Vec<Undo>,
    undefined: &mut bool,
) -> Result<(), Failure> {
    let replacement = match kind {
        Kind::Add(value) | Kind::Replace(value) => value.clone(),
        Kind::Remove => Value::Null,
        Kind::Test(value) if equal(doc, value) => return Ok(()),
        Kind::Test(_) => {
            return Err(Failure::patch(
                "Test operation failed",
                "TEST_OPERATION_FAILED",
                index,
            ));
        }
        Kind::Move("") | Kind::Copy("") | Kind::Get => return Ok(()),
        // Onto the root, the source is read and not removed, even by `move`.
        Kind::Move(from) | Kind::Copy(from) => match get_unchecked(doc, from)? {
            Prop::Json(value) => value.into_owned(),
            Prop::Undefined | Prop::Function => {
                *undefined = true;
                Value::Null
            }
        },
    };
    log.push(Undo::Root(std::mem::replace(doc, replacement)));
    Ok(())
}

/// Walks `path` with the library's validation and finds where the
/// operation lands. Reads only: the library validates before it writes.
fn locate(doc: &Value, path: &str, kind: Kind<'_>, index: usize) -> Result<Target, Failure> {
    let keys: Vec<&str> = path.split('/').collect();
    let len = keys.len();
    let mut obj = doc;
    let mut validated = false;
    let mut parent = Vec::new();
    for t in 1..len {
        let key = unescape(keys[t]);
        if key == "__proto__" || (key == "prototype" && keys[t - 1] == "constructor") {
            return Err(Failure::Type(BANNED.to_owned()));
        }
        if !validated {
            let existing = if matches!(read(obj, &key)?, Prop::Undefined) {
                Some(keys[..t].join("/"))
            } else if t == len - 1 {
                Some(path.to_owned())
            } else {
                None
            };
            if let Some(existing) = existing {
                validated = true;
                validate(doc, path, kind, &existing)?;
            }
        }
        let last = t == len - 1;
        let next = match obj {
            Value::Array(items) => {
                let at = if key == "-" {
                    items.len()
                } else if !is_integer(&key) {
                    return Err(Failure::patch(
                        "Expected an unsigned base-10 integer value, making the new referenced value the array element with the zero-based index",
                        "OPERATION_PATH_ILLEGAL_ARRAY_INDEX",
                        index,
                    ));
                } else {
                    to_index(&key)?
                };
                if last {
                    if matches!(kind, Kind::Add(_)) && at > items.len() {
                        return Err(Failure::patch(
                            "The specified index MUST NOT be greater than the number of elements in the array",
                            "OPERATION_VALUE_OUT_OF_BOUNDS",
                            index,
                        ));
                    }
                    return Ok(Target {
                        parent,
                        last: Last::Index(at),
                    });
                }
                parent.push(Step::Index(at));
                items.get(at)
            }
            _ if last => {
                return Ok(Target {
                    parent,
                    last: Last::Key(key.into_owned()),
                });
            }
            Value::Object(members) => {
                let next = members.get(key.as_ref());
                parent.push(Step::Key(key.into_owned()));
                next
            }
            _ => None,
        };
        match next {
            Some(next @ (Value::Object(_) | Value::Array(_))) => obj = next,
            _ => {
                return Err(Failure::patch(
                    "Cannot perform operation at the desired path",
                    "OPERATION_PATH_UNRESOLVABLE",
                    index,
                ));
            }
        }
    }
    Err(Failure::unresolvable(index))
}

/// The library's `validator`, run once per operation at the first key that
/// is missing (or at the last key). It checks nothing against a falsy
/// document.
fn validate(doc: &Value, path: &str, kind: Kind<'_>, existing: &str) -> Result<(), Failure> {
    if !truthy(doc) {
        return Ok(());
    }
    match kind {
        Kind::Add(_) => {
            let depth = path.split('/').count();
            let reached = existing.split('/').count();
            if depth != reached + 1 && depth != reached {
                return Err(Failure::patch(
                    "Cannot perform an `add` operation at the desired path",
                    "OPERATION_PATH_CANNOT_ADD",
                    0,
                ));
            }
        }
        Kind::Replace(_) | Kind::Remove | Kind::Get if path != existing => {
            return Err(Failure::unresolvable(0));
        }
        Kind::Move(from) | Kind::Copy(from) if !from.is_empty() => {
            // Only an unresolvable source counts; the library's check
            // swallows every other complaint about it.
            match locate(doc, from, Kind::Get, 0) {
                Err(Failure::Patch {
                    name: "OPERATION_PATH_UNRESOLVABLE",
                    ..
                }) => {
                    return Err(Failure::patch(
                        "Cannot perform the operation from a path that does not exist",
                        "OPERATION_FROM_UNRESOLVABLE",
                        0,
                    ));
                }
                Err(error @ Failure::Type(_)) => return Err(error),
                _ => {}
            }
        }
        _ => {}
    }
    Ok(())
}

/// Writes at a validated target (`add`, `replace`).
fn store(doc: &mut Value, target: &Target, value: Stored, log: &mut Vec<Undo>) {
    let Some(parent) = resolve_mut(doc, &target.parent) else {
        return;
    };
    match (parent, &target.last) {
        (Value::Array(items), Last::Index(at)) => {
            let value = match value {
                Stored::Json(value) => value,
                Stored::Invisible => Value::Null,
            };
            if let Some(slot) = items.get_mut(*at) {
                log.push(Undo::Replaced {
                    parent: target.parent.clone(),
                    at: *at,
                    old: std::mem::replace(slot, value),
                });
            }
        }
        (Value::Object(members), Last::Key(key)) => match value {
            Stored::Json(value) => log.push(Undo::Set {
                parent: target.parent.clone(),
                key: key.clone(),
                old: members.insert(key.clone(), value),
            }),
            Stored::Invisible => delete(members, &target.parent, key, log),
        },
        // Writing a property of a primitive is silently ignored.
        _ => {}
    }
}

/// Inserts at a validated array target, or stores at an object one.
fn insert(doc: &mut Value, target: &Target, value: Stored, log: &mut Vec<Undo>) {
    match (resolve_mut(doc, &target.parent), &target.last) {
        (Some(Value::Array(items)), Last::Index(at)) => {
            let at = (*at).min(items.len());
            items.insert(
                at,
                match value {
                    Stored::Json(value) => value,
                    Stored::Invisible => Value::Null,
                },
            );
            log.push(Undo::Inserted {
                parent: target.parent.clone(),
                at,
            });
        }
        (Some(Value::Array(_)), _) | (None, _) => {}
        (Some(_), _) => store(doc, target, value, log),
    }
}

/// Removes at a validated target (`remove`); returns what was there.
fn take<'a>(doc: &mut Value, target: &Target, log: &mut Vec<Undo>) -> Prop<'a> {
    let Some(parent) = resolve_mut(doc, &target.parent) else {
        return Prop::Undefined;
    };
    match (parent, &target.last) {
        (Value::Array(items), Last::Index(at)) if *at < items.len() => {
            let old = items.remove(*at);
            log.push(Undo::Spliced {
                parent: target.parent.clone(),
                at: *at,
                old: old.clone(),
            });
            Prop::Json(Cow::Owned(old))
        }
        (Value::Array(items), Last::ArrayProperty(key)) => {
            // `splice` reads a non-index key as a number, and `NaN` as 0.
            let at = splice_start(key, items.len());
            if at < items.len() {
                let old = items.remove(at);
                log.push(Undo::Spliced {
                    parent: target.parent.clone(),
                    at,
                    old: old.clone(),
                });
                Prop::Json(Cow::Owned(old))
            } else {
                Prop::Undefined
            }
        }
        (Value::Object(members), Last::Key(key)) => match members.get(key) {
            Some(old) => {
                let old = old.clone();
                delete(members, &target.parent, key, log);
                Prop::Json(Cow::Owned(old))
            }
            None if OBJECT_PROTO.contains(&key.as_str()) => Prop::Function,
            None => Prop::Undefined,
        },
        (parent, Last::Key(key)) => read(parent, key).map_or(Prop::Undefined, |prop| match prop {
            Prop::Json(value) => Prop::Json(Cow::Owned(value.into_owned())),
            Prop::Function => Prop::Function,
            Prop::Undefined => Prop::Undefined,
        }),
        _ => Prop::Undefined,
    }
}

fn delete(
    members: &mut serde_json::Map<String, Value>,
    parent: &[Step],
    key: &str,
    log: &mut Vec<Undo>,
) {
    if let Some(position) = members.keys().position(|k| k == key)
        && let Some(old) = members.shift_remove(key)
    {
        log.push(Undo::Deleted {
            parent: parent.to_vec(),
            key: key.to_owned(),
            position,
            old,
        });
    }
}

/// Where the library's unvalidated walk (used by `move` and `copy` once
/// the operation passed validation) ends.
#[derive(Debug)]
enum Walk<'a> {
    /// Inside the JSON document.
    Target(Target),
    /// On a property of something that is not a JSON container (a string,
    /// a number, an inherited method): what reading it yields. Writing
    /// there changes nothing.
    Detached(Prop<'a>),
}

fn walk_unchecked<'a>(doc: &'a Value, path: &str, writing: bool) -> Result<Walk<'a>, Failure> {
    let keys: Vec<&str> = path.split('/').collect();
    let len = keys.len();
    let banned = |t: usize, key: &str| {
        key == "__proto__" || (key == "prototype" && keys[t - 1] == "constructor")
    };
    let mut obj = doc;
    let mut parent = Vec::new();
    let mut t = 1;
    // Down through JSON containers.
    let mut detached = loop {
        if t >= len {
            return Err(Failure::undefined(path));
        }
        let key = unescape(keys[t]);
        if banned(t, &key) {
            return Err(Failure::Type(BANNED.to_owned()));
        }
        let last = t == len - 1;
        let (step, next) = match obj {
            Value::Array(items) => {
                let at = if key == "-" {
                    Some(items.len())
                } else if is_integer(&key) {
                    Some(to_index(&key)?)
                } else {
                    None
                };
                match at {
                    Some(at) if last => {
                        return Ok(Walk::Target(Target {
                            parent,
                            last: Last::Index(at),
                        }));
                    }
                    None if last => {
                        return Ok(Walk::Target(Target {
                            parent,
                            last: Last::ArrayProperty(key.into_owned()),
                        }));
                    }
                    Some(at) => (
                        Step::Index(at),
                        items
                            .get(at)
                            .map_or(Prop::Undefined, |v| Prop::Json(Cow::Borrowed(v))),
                    ),
                    None => (Step::Key(String::new()), read(obj, &key)?),
                }
            }
            Value::Null => {
                return Err(Failure::Type(format!(
                    "Cannot read properties of null (reading '{key}')"
                )));
            }
            _ if last => {
                return Ok(Walk::Target(Target {
                    parent,
                    last: Last::Key(key.into_owned()),
                }));
            }
            _ => {
                let next = read(obj, &key)?;
                (Step::Key(key.into_owned()), next)
            }
        };
        t += 1;
        match next {
            Prop::Json(Cow::Borrowed(next @ (Value::Object(_) | Value::Array(_)))) => {
                parent.push(step);
                obj = next;
            }
            other => break other,
        }
    };
    // Past the document, reading properties of what was found there.
    while t < len {
        let key = unescape(keys[t]);
        if banned(t, &key) {
            return Err(Failure::Type(BANNED.to_owned()));
        }
        detached = match detached {
            Prop::Json(value) => match read(&value, &key)? {
                Prop::Json(found) => Prop::Json(Cow::Owned(found.into_owned())),
                Prop::Function => Prop::Function,
                Prop::Undefined => Prop::Undefined,
            },
            Prop::Undefined if writing && t == len - 1 => {
                return Err(Failure::Type(format!(
                    "Cannot set properties of undefined (setting '{key}')"
                )));
            }
            Prop::Undefined => return Err(Failure::undefined(&key)),
            // Properties of a method (`length`, `name`) are not modelled.
            Prop::Function => Prop::Undefined,
        };
        t += 1;
    }
    Ok(Walk::Detached(detached))
}

fn get_unchecked<'a>(doc: &'a Value, from: &str) -> Result<Prop<'a>, Failure> {
    if from.is_empty() {
        return Ok(Prop::Json(Cow::Borrowed(doc)));
    }
    let target = match walk_unchecked(doc, from, false)? {
        Walk::Target(target) => target,
        Walk::Detached(found) => return Ok(found),
    };
    let parent = resolve(doc, &target.parent).ok_or_else(|| Failure::undefined(from))?;
    match (&target.last, parent) {
        (Last::Index(at), Value::Array(items)) => Ok(items
            .get(*at)
            .map_or(Prop::Undefined, |v| Prop::Json(Cow::Borrowed(v)))),
        (Last::Key(key) | Last::ArrayProperty(key), parent) => read(parent, key),
        _ => Ok(Prop::Undefined),
    }
}

fn remove_unchecked(doc: &mut Value, from: &str, log: &mut Vec<Undo>) -> Result<Stored, Failure> {
    let target = match walk_unchecked(doc, from, false)? {
        Walk::Target(target) => target,
        Walk::Detached(found) => return Ok(found.stored()),
    };
    Ok(take(doc, &target, log).stored())
}

fn add_unchecked(
    doc: &mut Value,
    path: &str,
    value: Stored,
    log: &mut Vec<Undo>,
) -> Result<(), Failure> {
    match walk_unchecked(doc, path, true)? {
        // A non-index property of an array never reaches JSON.
        Walk::Target(Target {
            last: Last::ArrayProperty(_),
            ..
        })
        | Walk::Detached(_) => {}
        Walk::Target(target) => insert(doc, &target, value, log),
    }
    Ok(())
}

fn undo(doc: &mut Value, log: Vec<Undo>) {
    for change in log.into_iter().rev() {
        match change {
            Undo::Root(old) => *doc = old,
            Undo::Set { parent, key, old } => {
                if let Some(Value::Object(members)) = resolve_mut(doc, &parent) {
                    match old {
                        Some(old) => {
                            members.insert(key, old);
                        }
                        None => {
                            members.shift_remove(&key);
                        }
                    }
                }
            }
            Undo::Deleted {
                parent,
                key,
                position,
                old,
            } => {
                if let Some(Value::Object(members)) = resolve_mut(doc, &parent) {
                    members.shift_insert(position.min(members.len()), key, old);
                }
            }
            Undo::Inserted { parent, at } => {
                if let Some(Value::Array(items)) = resolve_mut(doc, &parent)
                    && at < items.len()
                {
                    items.remove(at);
                }
            }
            Undo::Spliced { parent, at, old } => {
                if let Some(Value::Array(items)) = resolve_mut(doc, &parent) {
                    items.insert(at.min(items.len()), old);
                }
            }
            Undo::Replaced { parent, at, old } => {
                if let Some(Value::Array(items)) = resolve_mut(doc, &parent)
                    && let Some(slot) = items.get_mut(at)
                {
                    *slot = old;
                }
            }
        }
    }
}

fn resolve<'a>(doc: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    steps
        .iter()
        .try_fold(doc, |value, step| match (value, step) {
            (Value::Object(members), Step::Key(key)) => members.get(key),
            (Value::Array(items), Step::Index(at)) => items.get(*at),
            _ => None,
        })
}

fn resolve_mut<'a>(doc: &'a mut Value, steps: &[Step]) -> Option<&'a mut Value> {
    steps
        .iter()
        .try_fold(doc, |value, step| match (value, step) {
            (Value::Object(members), Step::Key(key)) => members.get_mut(key),
            (Value::Array(items), Step::Index(at)) => items.get_mut(*at),
            _ => None,
        })
}

/// `obj[key]` in JavaScript, for a JSON value `obj`.
fn read<'a>(obj: &'a Value, key: &str) -> Result<Prop<'a>, Failure> {
    let inherited = |own: &[&str]| {
        if own.contains(&key) || OBJECT_PROTO.contains(&key) {
            Prop::Function
        } else {
            Prop::Undefined
        }
    };
    Ok(match obj {
        Value::Null => {
            return Err(Failure::Type(format!(
                "Cannot read properties of null (reading '{key}')"
            )));
        }
        Value::Object(members) => match members.get(key) {
            Some(value) => Prop::Json(Cow::Borrowed(value)),
            None => inherited(&[]),
        },
        Value::Array(items) => match array_index(key) {
            Some(at) if at < items.len() => Prop::Json(Cow::Borrowed(&items[at])),
            Some(_) => Prop::Undefined,
            None if key == "length" => Prop::Json(Cow::Owned(Value::from(items.len()))),
            None => inherited(ARRAY_PROTO),
        },
        Value::String(text) => {
            let units: Vec<u16> = text.encode_utf16().collect();
            match array_index(key) {
                Some(at) if at < units.len() => Prop::Json(Cow::Owned(Value::String(
                    String::from_utf16_lossy(&units[at..=at]),
                ))),
                Some(_) => Prop::Undefined,
                None if key == "length" => Prop::Json(Cow::Owned(Value::from(units.len()))),
                None => inherited(STRING_PROTO),
            }
        }
        Value::Number(_) => inherited(NUMBER_PROTO),
        Value::Bool(_) => inherited(&[]),
    })
}

/// Whether `key` names an array element: the canonical decimal form of an
/// integer below 2^32 - 1.
pub(crate) fn array_index(key: &str) -> Option<usize> {
    if key.is_empty() || (key.len() > 1 && key.starts_with('0')) || !is_integer(key) {
        return None;
    }
    key.parse::<u32>()
        .ok()
        .filter(|&n| n != u32::MAX)
        .map(|n| n as usize)
}

/// The library's `isInteger`: only ASCII digits (so `""` counts).
fn is_integer(key: &str) -> bool {
    key.bytes().all(|b| b.is_ascii_digit())
}

/// `~~key` for a digit string, refused where it would wrap negative.
fn to_index(key: &str) -> Result<usize, Failure> {
    let value = key.parse::<f64>().unwrap_or(0.0);
    let wrapped = if value.is_finite() {
        value.trunc() % 4_294_967_296.0
    } else {
        0.0
    };
    if wrapped >= 2_147_483_648.0 {
        return Err(Failure::Type(format!(
            "array index '{key}' is out of the supported range"
        )));
    }
    Ok(wrapped as usize)
}

/// Where `Array.prototype.splice` starts for a non-index key.
fn splice_start(key: &str, len: usize) -> usize {
    let trimmed = key.trim();
    let number = match trimmed {
        "" => 0.0,
        "Infinity" | "+Infinity" => f64::INFINITY,
        "-Infinity" => f64::NEG_INFINITY,
        _ if trimmed
            .bytes()
            .any(|b| b.is_ascii_alphabetic() && b != b'e' && b != b'E') =>
        {
            f64::NAN
        }
        _ => trimmed.parse::<f64>().unwrap_or(f64::NAN),
    };
    if number.is_nan() {
        return 0;
    }
    let len_f = len as f64;
    let start = if number < 0.0 {
        (len_f + number.trunc()).max(0.0)
    } else {
        number.trunc().min(len_f)
    };
    start as usize
}

fn unescape(key: &str) -> Cow<'_, str> {
    if key.contains('~') {
        Cow::Owned(key.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(key)
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// The library's deep equality: numbers by value, objects regardless of
/// key order.
pub(crate) fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

/// `JSON.stringify(value, null, 2)`, keys in JavaScript's order: those that
/// are array indices first, ascending, then the rest as inserted.
pub(crate) fn pretty<T: serde::Serialize + ?Sized>(value: &T) -> String {
    fn js_order(value: Value) -> Value {
        match value {
            Value::Array(items) => Value::Array(items.into_iter().map(js_order).collect()),
            Value::Object(members) => {
                let (mut indices, rest): (Vec<_>, Vec<_>) = members
                    .into_iter()
                    .map(|(key, value)| (key, js_order(value)))
                    .partition(|(key, _)| array_index(key).is_some());
                indices.sort_by_key(|(key, _)| array_index(key));
                Value::Object(indices.into_iter().chain(rest).collect())
            }
            other => other,
        }
    }
    serde_json::to_value(value)
        .map(js_order)
        .and_then(|value| serde_json::to_string_pretty(&value))
        .unwrap_or_default()
}
