//! The generator's state, and how every event it makes goes out: decorated,
//! run through the model, and tracked.

use std::collections::{BTreeSet, HashMap, HashSet};

use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

use super::faults::SpecFault;
use super::message::Msg;
use super::mirror::{Mirror, Pending};
use super::schema::Kind;
use super::templates::{ZOD_MARKER, classify_ts_error, template};
use super::wire::{Owner, ty};
use super::{GeneratedStream, StreamClass};

pub(super) struct Gen {
    pub(super) rng: StdRng,
    pub(super) seed: u64,
    pub(super) index: usize,
    pub(super) m: Mirror,
    pub(super) events: Vec<Value>,
    pub(super) expanded: Vec<Value>,
    /// Feed events through the model (off once the fault is in).
    pub(super) checking: bool,
    pub(super) thread_id: String,
    pub(super) final_run_id: String,
    pub(super) run_id: String,
    pub(super) prev_run_id: Option<String>,
    pub(super) id_style: u8,
    pub(super) counter: usize,
    pub(super) used: HashSet<String>,
    pub(super) features: BTreeSet<&'static str>,
    pub(super) msgs: Vec<Msg>,
    pub(super) initial_messages: Vec<Value>,
    pub(super) initial_state: Value,
    pub(super) state: Value,
    /// Text messages opened in this stream (explicitly or by chunks).
    pub(super) text_ids: Vec<String>,
    /// Tool call id -> (planned arguments, how much was sent).
    pub(super) tool_plan: HashMap<String, (String, usize)>,
    pub(super) tool_names: HashMap<String, String>,
    pub(super) tool_ids: Vec<String>,
    pub(super) run_tool_ids: Vec<String>,
    pub(super) answered: HashSet<String>,
    pub(super) span_ids: Vec<String>,
    pub(super) reasoning_ids: Vec<String>,
    pub(super) activities: Vec<String>,
    pub(super) attr_tags: Vec<String>,
    pub(super) last_interrupts: Vec<String>,
    pub(super) expected_error: Option<String>,
    pub(super) fault_key: Option<&'static str>,
    pub(super) template_key: Option<&'static str>,
    pub(super) intended: Option<&'static str>,
    pub(super) spec: Option<(SpecFault, usize)>,
    pub(super) run_no: usize,
}

impl Gen {
    pub(super) fn new(mut rng: StdRng, seed: u64, index: usize) -> Self {
        let id_style = rng.random_range(0..3u8);
        let mut g = Gen {
            rng,
            seed,
            index,
            m: Mirror::default(),
            events: Vec::new(),
            expanded: Vec::new(),
            checking: true,
            thread_id: String::new(),
            final_run_id: String::new(),
            run_id: String::new(),
            prev_run_id: None,
            id_style,
            counter: 0,
            used: HashSet::new(),
            features: BTreeSet::new(),
            msgs: Vec::new(),
            initial_messages: Vec::new(),
            initial_state: json!({}),
            state: json!({}),
            text_ids: Vec::new(),
            tool_plan: HashMap::new(),
            tool_names: HashMap::new(),
            tool_ids: Vec::new(),
            run_tool_ids: Vec::new(),
            answered: HashSet::new(),
            span_ids: Vec::new(),
            reasoning_ids: Vec::new(),
            activities: Vec::new(),
            attr_tags: Vec::new(),
            last_interrupts: Vec::new(),
            expected_error: None,
            fault_key: None,
            template_key: None,
            intended: None,
            spec: None,
            run_no: 0,
        };
        g.thread_id = if g.p(0.05) {
            format!("thread-ü-{index}")
        } else {
            g.fresh("thread")
        };
        g.final_run_id = g.fresh("run");
        g
    }

    pub(super) fn finish(self, class: StreamClass) -> GeneratedStream {
        let (template, expected) = match class {
            StreamClass::Broken => (self.template_key, self.expected_error),
            _ => (None, None),
        };
        let intended = match class {
            StreamClass::Valid => None,
            StreamClass::Malformed => Some(ZOD_MARKER),
            _ => self.intended,
        };
        GeneratedStream {
            id: format!("{:016x}-{}", self.seed, self.index),
            thread_id: self.thread_id,
            run_id: self.final_run_id,
            events: self.events,
            initial_messages: self.initial_messages,
            initial_state: self.initial_state,
            class,
            intended_error: intended,
            expected_error: expected,
            template,
            fault: self.fault_key,
            features: self.features,
            expanded: match class {
                StreamClass::Valid | StreamClass::SpecOnly => self.expanded,
                _ => Vec::new(),
            },
        }
    }

    // ----- tags -----

    /// A tag for something new: mostly the parent, often an active subagent,
    /// sometimes attribution without any subagent lifecycle.
    pub(super) fn pick_tag(&mut self) -> Owner {
        let r = self.range(0, 100);
        if r < 55 {
            return None;
        }
        let active = self.m.subs.0.clone();
        if r < 88 {
            return self.pick(&active);
        }
        let closed: Vec<String> = self
            .m
            .subs_closed
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !closed.is_empty() && self.p(0.4) {
            self.feature("tag_of_finished_subagent");
            return self.pick(&closed);
        }
        self.feature("attribution_only_tag");
        Some(self.attr_tag())
    }

    pub(super) fn attr_tag(&mut self) -> String {
        if self.attr_tags.len() < 2 || self.p(0.2) {
            let t = self.fresh_or_empty("attr");
            self.attr_tags.push(t.clone());
            t
        } else {
            let tags = self.attr_tags.clone();
            self.pick(&tags).unwrap_or_default()
        }
    }

    /// A tag for a continuation of an entity whose recorded owner is `owner`.
    pub(super) fn cont_tag(&mut self, owner: Option<Owner>) -> Owner {
        match owner {
            Some(Some(o)) => {
                if self.p(0.6) {
                    Some(o)
                } else {
                    None
                }
            }
            Some(None) => None,
            None => self.pick_tag(),
        }
    }

    /// A tag that is present and differs from `owner`.
    pub(super) fn other_tag(&mut self, owner: &Owner) -> String {
        let mut candidates: Vec<String> = self.m.subs.0.clone();
        candidates.extend(self.attr_tags.iter().cloned());
        candidates.retain(|c| Some(c) != owner.as_ref());
        if !candidates.is_empty() && self.p(0.7) {
            return self.pick(&candidates).unwrap_or_default();
        }
        loop {
            let t = self.attr_tag();
            if Some(&t) != owner.as_ref() {
                return t;
            }
        }
    }

    // ----- emission -----

    fn decorate(&mut self, ev: &mut Value) {
        if self.p(0.05) {
            let md = self.metadata();
            ev["metadata"] = md;
            self.feature("metadata");
        }
        if self.p(0.06) {
            ev["timestamp"] = json!(1_760_000_000_000i64 + self.range(0, 1_000_000) as i64);
        }
        if self.p(0.03) {
            let mut raw = self.json_value(2);
            if raw.is_null() {
                raw = json!({"provider": "x"});
            }
            ev["rawEvent"] = raw;
            self.feature("raw_event");
        } else if self.p(0.01) {
            ev["rawEvent"] = Value::Null;
            self.feature("legacy_null_raw_event");
        }
        if self.p(0.025) {
            let key = self.pick_str(&["futureField", "x_vendor", "trace_id"]);
            ev[key] = self.json_value(1);
            self.feature("unknown_property");
        }
        if self.p(0.3) {
            let t = ty(ev).to_owned();
            if [
                "RUN_STARTED",
                "RUN_FINISHED",
                "RUN_ERROR",
                "MESSAGES_SNAPSHOT",
            ]
            .contains(&t.as_str())
                && self.p(0.1)
            {
                ev["subagentRunId"] = json!("not-attributable");
                self.feature("tag_on_unattributable_event");
            }
        }
    }

    pub(super) fn emit(&mut self, mut ev: Value) {
        self.decorate(&mut ev);
        self.push(ev);
    }

    pub(super) fn push(&mut self, ev: Value) {
        if self.checking {
            match self.m.feed(&ev) {
                Ok(out) => {
                    self.note_lane_closes(&ev, &out);
                    for e in &out {
                        self.track(e);
                    }
                    self.expanded.extend(out);
                }
                Err(err) => panic!(
                    "streamgen bug (seed {:#x}, index {}): the generator's own model rejects {ev}: {err}\nevents so far: {}",
                    self.seed,
                    self.index,
                    Value::Array(self.events.clone())
                ),
            }
        }
        self.events.push(ev);
    }

    /// Notes when an event closed a chunk lane (its expansion starts with a
    /// synthesised `*_END` for another entity).
    fn note_lane_closes(&mut self, ev: &Value, out: &[Value]) {
        let t = ty(ev);
        let closes = out.len() > 1 && ty(&out[0]).ends_with("_END") && ty(&out[0]) != t;
        if !closes {
            return;
        }
        self.feature(match t {
            "TEXT_MESSAGE_CHUNK" | "TOOL_CALL_CHUNK" | "REASONING_MESSAGE_CHUNK" => {
                "chunk_closed_by_next_chunk"
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => "chunk_closed_by_subagent_end",
            "RUN_FINISHED" | "RUN_ERROR" | "RUN_STARTED" | "MESSAGES_SNAPSHOT" => {
                "chunk_closed_by_run_level_event"
            }
            _ => "chunk_closed_by_explicit_event",
        });
    }

    /// Injects the faulty event(s): all but the last must pass, the last must
    /// fail with the fault's template.
    pub(super) fn commit(
        &mut self,
        evs: Vec<Value>,
        key: &'static str,
        template_key: &'static str,
    ) {
        let mut probe = self.m.clone();
        let last = evs.len() - 1;
        for (i, e) in evs.iter().enumerate() {
            match probe.feed(e) {
                Ok(_) if i < last => {}
                Ok(_) => panic!(
                    "streamgen bug (seed {:#x}, index {}): fault {key} not rejected by the model: {e}\nevents: {}",
                    self.seed,
                    self.index,
                    Value::Array(self.events.clone())
                ),
                Err(err) => {
                    let tpl = template(template_key);
                    if i < last || classify_ts_error(&err) != Some(template_key) {
                        panic!(
                            "streamgen bug (seed {:#x}, index {}): fault {key} rejected with the wrong error at {e}: {err} (wanted {:?})\nevents: {}",
                            self.seed,
                            self.index,
                            tpl.fragments,
                            Value::Array(self.events.clone())
                        );
                    }
                    self.expected_error = Some(err);
                    self.intended = Some(tpl.fragments[0]);
                }
            }
        }
        self.checking = false;
        self.events.extend(evs);
        self.fault_key = Some(key);
        self.template_key = Some(template_key);
    }

    // ----- the model's open entities -----

    /// Open entities of `kind` opened by explicit events (not held by a chunk lane).
    pub(super) fn explicit(&self, kind: Kind) -> Vec<String> {
        let set = match kind {
            Kind::Text => &self.m.text,
            Kind::Tool => &self.m.tools,
            Kind::Reasoning => &self.m.rmsgs,
        };
        set.0
            .iter()
            .filter(|id| !self.m.lane_held(kind, id))
            .cloned()
            .collect()
    }

    pub(super) fn lanes_of(&self, kind: Kind) -> Vec<(Owner, Pending)> {
        self.m
            .lanes
            .iter()
            .filter(|(_, p)| p.kind == kind)
            .cloned()
            .collect()
    }
}
