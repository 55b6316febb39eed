//! Broken streams: a valid prefix, a "prepare" phase of valid events that
//! reaches the state a fault needs (the ensure helpers), the faulty event,
//! and an arbitrary tail.

use std::collections::BTreeSet;

use rand::seq::IndexedRandom;
use serde_json::{Value, json};

use super::faults::Fault;
use super::generator::Gen;
use super::mirror::Pending;
use super::schema::Kind;
use super::wire::{E, Owner, ty};

impl Gen {
    pub(super) fn prefix_runs(&mut self) {
        let n = *[0usize, 0, 0, 1, 1, 2].choose(&mut self.rng).unwrap_or(&0);
        for _ in 0..n {
            self.one_run(false);
        }
        if n > 0 {
            self.feature("fault_after_earlier_runs");
        }
    }

    /// What follows the faulty event: irrelevant to the verdict, so arbitrary.
    pub(super) fn tail(&mut self) {
        self.checking = false;
        if self.p(0.5) {
            return;
        }
        for _ in 0..self.range(0, 4) {
            let ev = match self.range(0, 3) {
                0 => E::new("TEXT_MESSAGE_CONTENT")
                    .s("messageId", self.fresh("tail"))
                    .s("delta", "after")
                    .done(),
                1 => E::new("CUSTOM")
                    .s("name", "tail")
                    .v("value", Value::Null)
                    .done(),
                _ => E::new("STATE_SNAPSHOT")
                    .v("snapshot", json!({"tail": true}))
                    .done(),
            };
            self.events.push(ev);
        }
        let ev = self.run_finished_base().done();
        self.events.push(ev);
    }

    /// Some event, with fresh ids, of a type picked from a broad list.
    pub(super) fn some_event(&mut self) -> Value {
        match self.range(0, 13) {
            0 => E::new("TEXT_MESSAGE_START")
                .s("messageId", self.fresh("late"))
                .done(),
            1 => E::new("TEXT_MESSAGE_CHUNK")
                .s("messageId", self.fresh("late"))
                .s("delta", "x")
                .done(),
            2 => E::new("TOOL_CALL_START")
                .s("toolCallId", self.fresh("late"))
                .s("toolCallName", "search")
                .done(),
            3 => E::new("STATE_SNAPSHOT")
                .v("snapshot", json!({"late": 1}))
                .done(),
            4 => E::new("CUSTOM")
                .s("name", "acme:late")
                .v("value", json!(1))
                .done(),
            5 => E::new("RAW").v("event", json!({"x": 1})).done(),
            6 => E::new("STEP_STARTED").s("stepName", "late").done(),
            7 => E::new("MESSAGES_SNAPSHOT").v("messages", json!([])).done(),
            8 => self.run_finished_base().done(),
            9 => E::new("SUBAGENT_STARTED")
                .s("subagentRunId", self.fresh("late"))
                .s("name", "x")
                .done(),
            10 => E::new("ACTIVITY_SNAPSHOT")
                .s("messageId", self.fresh("late"))
                .s("activityType", "PLAN")
                .v("content", json!({}))
                .done(),
            11 => E::new("TOOL_CALL_RESULT")
                .s("messageId", self.fresh("late"))
                .s("toolCallId", "c")
                .s("content", "ok")
                .done(),
            _ => E::new("REASONING_ENCRYPTED_VALUE")
                .s("subtype", "message")
                .s("entityId", "m")
                .s("encryptedValue", "x")
                .done(),
        }
    }

    pub(super) fn broken_stream(&mut self, fault: Fault) {
        self.initial_context();
        if fault == Fault::FirstNotRunStarted {
            if self.p(0.3) {
                let ev = self.unknown_event();
                self.push(ev);
            }
            let ev = self.some_event();
            let label = match ty(&ev) {
                "TEXT_MESSAGE_CHUNK" => "first/chunk",
                "RUN_FINISHED" => "first/run_finished",
                _ => "first/other",
            };
            self.commit(vec![ev], label, fault.template());
            self.tail();
            return;
        }
        self.prefix_runs();
        self.run_start(true);
        let n = self.range(0, 25);
        self.body(n);
        self.inject(fault);
        self.tail();
    }

    pub(super) fn run_finished_fault(&mut self, label: &'static str, fault: Fault) {
        let ev = self.run_finished_base().done();
        self.commit(vec![ev], label, fault.template());
    }

    // ----- ensure helpers (all emit valid events) -----

    pub(super) fn ensure_explicit(&mut self, kind: Kind) -> String {
        let ids = self.explicit(kind);
        match self.pick(&ids) {
            Some(id) if self.p(0.7) => id,
            _ => {
                let tag = self.pick_tag();
                match kind {
                    Kind::Text => self.open_text(&tag),
                    Kind::Tool => self.open_tool(&tag, None, false),
                    Kind::Reasoning => self.open_reasoning(&tag),
                }
            }
        }
    }

    pub(super) fn ensure_span(&mut self) -> String {
        let spans = self.m.spans.0.clone();
        match self.pick(&spans) {
            Some(id) if self.p(0.7) => id,
            _ => {
                let tag = self.pick_tag();
                self.open_span(&tag)
            }
        }
    }

    /// An entity of `kind` that this run opened and closed (its owner is on record).
    pub(super) fn ensure_closed(&mut self, kind: Kind) -> String {
        let (pool, owners) = match kind {
            Kind::Text => (&self.text_ids, &self.m.own_msg),
            Kind::Tool => (&self.tool_ids, &self.m.own_tool),
            Kind::Reasoning => (&self.reasoning_ids, &self.m.own_reason),
        };
        let open = match kind {
            Kind::Text => &self.m.text,
            Kind::Tool => &self.m.tools,
            Kind::Reasoning => &self.m.rmsgs,
        };
        let closed: Vec<String> = pool
            .iter()
            .filter(|id| owners.contains_key(*id) && !open.has(id))
            .cloned()
            .collect();
        if let Some(id) = self.pick(&closed)
            && self.p(0.7)
        {
            return id;
        }
        let tag = self.pick_tag();
        match kind {
            Kind::Text => {
                let id = self.open_text(&tag);
                self.close_text(&id);
                id
            }
            Kind::Tool => {
                let id = self.open_tool(&tag, None, false);
                self.close_tool(&id);
                id
            }
            Kind::Reasoning => {
                let id = self.open_reasoning(&tag);
                self.close_reasoning(&id);
                id
            }
        }
    }

    pub(super) fn ensure_closed_span(&mut self) -> String {
        let closed: Vec<String> = self
            .span_ids
            .iter()
            .filter(|id| self.m.own_reason.contains_key(*id) && !self.m.spans.has(id))
            .cloned()
            .collect();
        if let Some(id) = self.pick(&closed) {
            return id;
        }
        let tag = self.pick_tag();
        let id = self.open_span(&tag);
        self.close_span(&id);
        id
    }

    pub(super) fn ensure_lane(&mut self, kind: Kind) -> (Owner, Pending) {
        let lanes = self.lanes_of(kind);
        if let Some(l) = self.pick(&lanes)
            && self.p(0.6)
        {
            return l;
        }
        let (owner, id) = self.open_chunk(kind, None);
        let p = self.m.lane(&owner).cloned().expect("lane just opened");
        debug_assert_eq!(p.id, id);
        (owner, p)
    }

    pub(super) fn ensure_step(&mut self) -> (Owner, String) {
        let steps = self.m.active_steps();
        match self.pick(&steps) {
            Some(s) if self.p(0.7) => s,
            _ => {
                let owner = self.pick_tag();
                let name = self.start_step(&owner);
                (owner, name)
            }
        }
    }

    pub(super) fn ensure_subagent(&mut self) -> String {
        let active = self.m.subs.0.clone();
        match self.pick(&active) {
            Some(s) if self.p(0.7) => s,
            _ => self.start_subagent(),
        }
    }

    pub(super) fn ensure_activity(&mut self) -> (String, Owner) {
        let known: Vec<String> = self
            .m
            .own_act
            .keys()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if let Some(id) = self.pick(&known)
            && self.p(0.6)
        {
            let owner = self.m.own_act.get(&id).cloned().unwrap_or(None);
            return (id, owner);
        }
        let id = self.fresh("act");
        self.activities.push(id.clone());
        let tag = self.pick_tag();
        self.emit(
            E::new("ACTIVITY_SNAPSHOT")
                .s("messageId", id.clone())
                .s("activityType", "PLAN")
                .v("content", json!({"steps": []}))
                .tag(&tag)
                .done(),
        );
        (id, tag)
    }

    /// A chunk continuing `pending` in lane `owner`, spelled with its id, its
    /// tag, or neither (when that resolves to the same lane).
    pub(super) fn continuation(&mut self, kind: Kind, owner: &Owner, pending: &Pending) -> E {
        let mut e = E::new(kind.family().chunk);
        let bare_ok = self.m.resolve_lane(kind, None, &None).ok().as_ref() == Some(owner);
        match self.range(0, 3) {
            0 if bare_ok => {}
            1 if owner.is_some() => e = e.tag(owner),
            _ => e = e.s(kind.family().id_field, pending.id.clone()),
        }
        e
    }

    pub(super) fn snapshot_overriding(
        &mut self,
        overrides: &[(String, Owner)],
        extra: Vec<Value>,
    ) -> Value {
        let mut out = Vec::new();
        for m in self.msgs.clone() {
            let owner = match overrides.iter().find(|(id, _)| *id == m.id) {
                Some((_, o)) => o.clone(),
                None => self.owner_in_bucket(&m).unwrap_or_else(|| m.owner.clone()),
            };
            out.push(m.to_json(&owner));
        }
        out.extend(extra);
        E::new("MESSAGES_SNAPSHOT")
            .v("messages", Value::Array(out))
            .done()
    }

    /// A target for a continuation that names nothing open: an unknown id, a
    /// closed one, or one a chunk lane holds and the event's own tag closes.
    pub(super) fn unstarted_target(&mut self, kind: Kind) -> (&'static str, String, Owner) {
        match self.range(0, 3) {
            0 => ("unstarted/unknown", self.fresh("nothing"), self.pick_tag()),
            1 => {
                let id = self.ensure_closed(kind);
                let owners = match kind {
                    Kind::Text => &self.m.own_msg,
                    Kind::Tool => &self.m.own_tool,
                    Kind::Reasoning => &self.m.own_reason,
                };
                let tag = owners.get(&id).cloned().unwrap_or(None);
                ("unstarted/closed", id, tag)
            }
            _ => {
                let (owner, pending) = self.ensure_lane(kind);
                ("unstarted/closed_by_own_lane", pending.id, owner)
            }
        }
    }
}
