//! JSON Patch (RFC 6902): a small applier for the generator's own idea of
//! state, and the patches the generator sends.

use serde_json::{Value, json};

use super::generator::Gen;
use super::wire::sget;

fn esc(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn tokens(path: &str) -> Option<Vec<String>> {
    if path.is_empty() {
        return Some(Vec::new());
    }
    let rest = path.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

fn get_mut<'a>(doc: &'a mut Value, toks: &[String]) -> Option<&'a mut Value> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(o) => o.get_mut(t)?,
            Value::Array(a) => a.get_mut(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn add_at(doc: &mut Value, path: &str, value: Value) -> Option<()> {
    let toks = tokens(path)?;
    let Some((last, parent)) = toks.split_last() else {
        *doc = value;
        return Some(());
    };
    match get_mut(doc, parent)? {
        Value::Object(o) => {
            o.insert(last.clone(), value);
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
            } else {
                let i = last.parse::<usize>().ok()?;
                if i > a.len() {
                    return None;
                }
                a.insert(i, value);
            }
        }
        _ => return None,
    }
    Some(())
}

fn remove_at(doc: &mut Value, path: &str) -> Option<Value> {
    let toks = tokens(path)?;
    let (last, parent) = toks.split_last()?;
    match get_mut(doc, parent)? {
        Value::Object(o) => o.remove(last),
        Value::Array(a) => {
            let i = last.parse::<usize>().ok()?;
            (i < a.len()).then(|| a.remove(i))
        }
        _ => None,
    }
}

pub(super) fn apply_patch(doc: &Value, ops: &[Value]) -> Option<Value> {
    let mut d = doc.clone();
    for op in ops {
        let path = sget(op, "path")?;
        match sget(op, "op")? {
            "add" => add_at(&mut d, path, op.get("value")?.clone())?,
            "remove" => {
                remove_at(&mut d, path)?;
            }
            "replace" => {
                let toks = tokens(path)?;
                *get_mut(&mut d, &toks)? = op.get("value")?.clone();
            }
            "move" => {
                let v = remove_at(&mut d, sget(op, "from")?)?;
                add_at(&mut d, path, v)?;
            }
            "copy" => {
                let toks = tokens(sget(op, "from")?)?;
                let v = get_mut(&mut d, &toks)?.clone();
                add_at(&mut d, path, v)?;
            }
            "test" => {
                let toks = tokens(path)?;
                if *get_mut(&mut d, &toks)? != *op.get("value")? {
                    return None;
                }
            }
            _ => {}
        }
    }
    Some(d)
}

impl Gen {
    /// A JSON Patch for `doc`: one that applies, or one that does not.
    pub(super) fn patch_for(&mut self, doc: &Value, applicable: bool) -> Vec<Value> {
        if !applicable {
            let key = esc(&self.fresh("missing"));
            return vec![match self.range(0, 5) {
                0 => json!({"op": "remove", "path": format!("/{key}")}),
                1 => json!({"op": "replace", "path": format!("/{key}"), "value": 1}),
                2 => json!({"op": "test", "path": "", "value": {"certainly": "not this"}}),
                3 => json!({"op": "add", "path": format!("/{key}/deeper"), "value": true}),
                _ => json!({"op": "move", "from": format!("/{key}"), "path": "/elsewhere"}),
            }];
        }
        if self.p(0.05) {
            self.feature("empty_patch");
            return Vec::new();
        }
        let mut work = doc.clone();
        let mut ops = Vec::new();
        for _ in 0..self.range(1, 4) {
            let op = self.one_op(&work);
            if let Some(next) = apply_patch(&work, std::slice::from_ref(&op)) {
                work = next;
                ops.push(op);
            }
        }
        if ops.is_empty() {
            ops.push(json!({"op": "replace", "path": "", "value": {"reset": true}}));
            self.feature("patch_replaces_root");
        }
        if self.p(0.05) {
            ops.push(json!({"op": "_future_op", "path": "/x"}));
            self.feature("patch_unknown_op_stripped");
        }
        ops
    }

    fn one_op(&mut self, doc: &Value) -> Value {
        match doc {
            Value::Object(o) => {
                let keys: Vec<String> = o.keys().cloned().collect();
                let existing = self.pick(&keys);
                let r = self.range(0, 7);
                match (r, existing) {
                    (1, Some(k)) => {
                        json!({"op": "replace", "path": format!("/{}", esc(&k)), "value": self.json_value(1)})
                    }
                    (2, Some(k)) => json!({"op": "remove", "path": format!("/{}", esc(&k))}),
                    (3, Some(k)) => {
                        json!({"op": "test", "path": format!("/{}", esc(&k)), "value": o[&k].clone()})
                    }
                    (4, Some(k)) => {
                        let to = self.pick_str(&["copied", "b/c", "t~2"]);
                        json!({"op": "copy", "from": format!("/{}", esc(&k)), "path": format!("/{}", esc(to))})
                    }
                    (5, Some(k)) => {
                        let to = self.pick_str(&["moved", "m~v"]);
                        json!({"op": "move", "from": format!("/{}", esc(&k)), "path": format!("/{}", esc(to))})
                    }
                    _ => {
                        let k = self.pick_str(&["count", "items", "a/b", "ti~lde", "новый", "x"]);
                        if k.contains('/') || k.contains('~') {
                            self.feature("pointer_escapes");
                        }
                        json!({"op": "add", "path": format!("/{}", esc(k)), "value": self.json_value(2)})
                    }
                }
            }
            Value::Array(a) => match self.range(0, 4) {
                0 if !a.is_empty() => json!({"op": "remove", "path": "/0"}),
                1 if !a.is_empty() => {
                    json!({"op": "replace", "path": format!("/{}", a.len() - 1), "value": self.json_value(1)})
                }
                2 => json!({"op": "add", "path": "/0", "value": self.json_value(1)}),
                _ => json!({"op": "add", "path": "/-", "value": self.json_value(1)}),
            },
            _ => json!({"op": "replace", "path": "", "value": self.object()}),
        }
    }
}
