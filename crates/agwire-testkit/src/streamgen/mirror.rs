//! The model of the official client: compatibility boundary, enforcement (event
//! types only), chunk expansion and verification. Chunk expansion is in
//! `transform`, verification in `verify`.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::schema::{KNOWN_ROLES, KNOWN_TYPES, Kind};
use super::wire::{Owner, sget, tag_of, ty};

/// A JS `Set<string>`: insertion-ordered, re-adding keeps the position.
#[derive(Debug, Clone, Default)]
pub(super) struct OrdSet(pub(super) Vec<String>);

impl OrdSet {
    pub(super) fn has(&self, id: &str) -> bool {
        self.0.iter().any(|x| x == id)
    }
    pub(super) fn add(&mut self, id: &str) {
        if !self.has(id) {
            self.0.push(id.to_owned());
        }
    }
    pub(super) fn delete(&mut self, id: &str) {
        self.0.retain(|x| x != id);
    }
    pub(super) fn joined(&self) -> String {
        self.0.join(", ")
    }
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The stream one chunk lane is assembling.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub(super) kind: Kind,
    pub(super) id: String,
    /// Text: the established role (explicit or the assistant default).
    pub(super) role: String,
    pub(super) name: Option<String>,
    pub(super) tool_name: String,
    pub(super) parent: Option<String>,
    /// The opening chunk's own `subagentRunId`.
    pub(super) tag: Owner,
}

/// The client's per-stream state, as `transformChunks` and `verifyEvents` keep it.
#[derive(Debug, Clone, Default)]
pub(super) struct Mirror {
    pub(super) first: bool,
    pub(super) run_started: bool,
    pub(super) run_finished: bool,
    pub(super) run_error: bool,
    pub(super) text: OrdSet,
    pub(super) tools: OrdSet,
    pub(super) spans: OrdSet,
    pub(super) rmsgs: OrdSet,
    pub(super) own_msg: HashMap<String, Owner>,
    pub(super) own_tool: HashMap<String, Owner>,
    pub(super) own_act: HashMap<String, Owner>,
    pub(super) own_reason: HashMap<String, Owner>,
    /// owner -> step names, both insertion-ordered (JS nested `Map`s).
    pub(super) steps: Vec<(Owner, Vec<String>)>,
    pub(super) subs: OrdSet,
    pub(super) subs_closed: HashSet<String>,
    /// owner -> pending stream, insertion-ordered (JS `Map`).
    pub(super) lanes: Vec<(Owner, Pending)>,
}

/// The compatibility boundary's legacy-null conversions (the ones that matter here).
fn compat(raw: &Value) -> Value {
    let mut e = raw.clone();
    if let Some(o) = e.as_object_mut() {
        let t = o
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if o.get("rawEvent") == Some(&Value::Null) {
            o.remove("rawEvent");
        }
        if (t == "RUN_FINISHED" || t == "SUBAGENT_FINISHED")
            && o.get("result") == Some(&Value::Null)
        {
            o.remove("result");
        }
        if (t == "TOOL_CALL_START" || t == "TOOL_CALL_CHUNK")
            && o.get("parentMessageId") == Some(&Value::Null)
        {
            o.remove("parentMessageId");
        }
        if t == "RUN_FINISHED" && o.get("outcome") == Some(&Value::Null) {
            o.remove("outcome");
        }
    }
    e
}

impl Mirror {
    /// Runs one wire event through the model. `Ok` holds what reaches the
    /// application (after expansion); `Err` the client's error message.
    pub(super) fn feed(&mut self, raw: &Value) -> Result<Vec<Value>, String> {
        let event = compat(raw);
        if !KNOWN_TYPES.contains(&ty(&event)) {
            return Ok(Vec::new());
        }
        let expanded = self.transform(&event)?;
        for e in &expanded {
            self.verify(e)?;
        }
        Ok(expanded)
    }

    pub(super) fn reset(&mut self) {
        *self = Mirror {
            first: true,
            run_started: true,
            ..Mirror::default()
        };
    }

    pub(super) fn steps_for(&mut self, owner: &Owner) -> &mut Vec<String> {
        let pos = match self.steps.iter().position(|(o, _)| o == owner) {
            Some(pos) => pos,
            None => {
                self.steps.push((owner.clone(), Vec::new()));
                self.steps.len() - 1
            }
        };
        &mut self.steps[pos].1
    }

    pub(super) fn step_active(&self, owner: &Owner, name: &str) -> bool {
        self.steps
            .iter()
            .any(|(o, names)| o == owner && names.iter().any(|n| n == name))
    }

    pub(super) fn active_steps(&self) -> Vec<(Owner, String)> {
        self.steps
            .iter()
            .flat_map(|(o, names)| names.iter().map(move |n| (o.clone(), n.clone())))
            .collect()
    }

    pub(super) fn seed(&mut self, messages: Option<&Value>, authoritative: bool) {
        let Some(messages) = messages.and_then(Value::as_array) else {
            return;
        };
        for msg in messages {
            let Some(id) = sget(msg, "id") else { continue };
            let role = sget(msg, "role").unwrap_or("");
            if !KNOWN_ROLES.contains(&role) {
                continue; // enforcement drops an unrecognised message
            }
            let owner = tag_of(msg);
            let bucket = match role {
                "reasoning" => &mut self.own_reason,
                "activity" => &mut self.own_act,
                _ => &mut self.own_msg,
            };
            if authoritative || !bucket.contains_key(id) {
                bucket.insert(id.to_owned(), owner.clone());
            }
            if let Some(calls) = msg.get("toolCalls").and_then(Value::as_array) {
                for call in calls {
                    if let Some(cid) = sget(call, "id")
                        && (authoritative || !self.own_tool.contains_key(cid))
                    {
                        self.own_tool.insert(cid.to_owned(), owner.clone());
                    }
                }
            }
        }
    }
}
