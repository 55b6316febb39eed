//! Faults of chunk expansion: first chunks without an id or a name, chunks
//! that contradict their open stream, and chunks no lane can be chosen for.

use rand::seq::IndexedRandom;
use serde_json::Value;

use super::faults::Fault;
use super::generator::Gen;
use super::schema::Kind;
use super::vocabulary::{SPEAKERS, TEXT_ROLES, TOOL_NAMES};
use super::wire::{E, Owner};

impl Gen {
    pub(super) fn chunk_fault(&mut self, f: Fault, tpl: &'static str) {
        match f {
            Fault::ChunkTextNoId | Fault::ChunkToolNoId | Fault::ChunkReasoningNoId => {
                let kind = match f {
                    Fault::ChunkTextNoId => Kind::Text,
                    Fault::ChunkToolNoId => Kind::Tool,
                    _ => Kind::Reasoning,
                };
                let other_kind_lanes: Vec<Owner> = self
                    .m
                    .lanes
                    .iter()
                    .filter(|(o, p)| p.kind != kind && o.is_some())
                    .map(|(o, _)| o.clone())
                    .collect();
                let (label, tag) = match self.range(0, 3) {
                    0 => {
                        for (owner, _) in self.lanes_of(kind) {
                            self.emit(
                                E::new("CUSTOM")
                                    .s("name", "flush")
                                    .v("value", Value::Null)
                                    .tag(&owner)
                                    .done(),
                            );
                        }
                        ("chunk_first/untagged_nothing_open", None)
                    }
                    1 if !other_kind_lanes.is_empty() => (
                        "chunk_first/lane_holds_other_kind",
                        self.pick(&other_kind_lanes).unwrap_or(None),
                    ),
                    _ => {
                        let mut t = self.fresh("lane");
                        while self.m.lane(&Some(t.clone())).is_some() {
                            t = self.fresh("lane");
                        }
                        ("chunk_first/empty_lane", Some(t))
                    }
                };
                let mut e = E::new(kind.family().chunk).s("delta", "x").tag(&tag);
                if kind == Kind::Tool && self.p(0.5) {
                    e = e.s("toolCallName", "search");
                }
                self.commit(vec![e.done()], label, tpl);
            }
            Fault::ChunkToolNoName => {
                let tag = self.pick_tag();
                let ev = E::new("TOOL_CALL_CHUNK")
                    .s("toolCallId", self.fresh("call"))
                    .s("delta", "{")
                    .tag(&tag)
                    .done();
                self.commit(vec![ev], "chunk_first/tool_without_name", tpl);
            }
            Fault::ChunkConflictRole | Fault::ChunkConflictName => {
                let (owner, pending) = self.ensure_lane(Kind::Text);
                let mut e = self.continuation(Kind::Text, &owner, &pending);
                if f == Fault::ChunkConflictRole {
                    let roles: Vec<&'static str> = TEXT_ROLES
                        .iter()
                        .copied()
                        .filter(|r| *r != pending.role)
                        .collect();
                    e = e.s("role", self.pick(&roles).unwrap_or("user"));
                } else {
                    let names: Vec<&'static str> = SPEAKERS
                        .iter()
                        .copied()
                        .filter(|n| Some(*n) != pending.name.as_deref())
                        .collect();
                    e = e.s("name", self.pick(&names).unwrap_or("zed"));
                }
                let ev = e.s("delta", "x").done();
                self.commit(
                    vec![ev],
                    if f == Fault::ChunkConflictRole {
                        "chunk_conflict/role"
                    } else {
                        "chunk_conflict/name"
                    },
                    tpl,
                );
            }
            Fault::ChunkConflictToolName | Fault::ChunkConflictParent => {
                let (owner, pending) = self.ensure_lane(Kind::Tool);
                let mut e = self.continuation(Kind::Tool, &owner, &pending);
                if f == Fault::ChunkConflictToolName {
                    let names: Vec<&'static str> = TOOL_NAMES
                        .iter()
                        .copied()
                        .filter(|n| *n != pending.tool_name)
                        .collect();
                    e = e.s("toolCallName", self.pick(&names).unwrap_or("other"));
                } else {
                    e = e.s("parentMessageId", self.fresh("other-parent"));
                }
                let ev = e.s("delta", "1").done();
                self.commit(
                    vec![ev],
                    if f == Fault::ChunkConflictParent {
                        "chunk_conflict/parent"
                    } else {
                        "chunk_conflict/tool_name"
                    },
                    tpl,
                );
            }
            Fault::ChunkLaneOwner => {
                let kind = *[Kind::Text, Kind::Tool, Kind::Reasoning]
                    .choose(&mut self.rng)
                    .expect("kinds");
                let (owner, pending) = self.ensure_lane(kind);
                let other = Some(self.other_tag(&owner));
                let ev = E::new(kind.family().chunk)
                    .s(kind.family().id_field, pending.id)
                    .s("delta", "x")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "chunk_lane_owner", tpl);
            }
            Fault::ChunkAmbiguous => {
                let kind = *[Kind::Text, Kind::Tool, Kind::Reasoning]
                    .choose(&mut self.rng)
                    .expect("kinds");
                if self.m.lane(&None).is_some_and(|p| p.kind == kind) {
                    self.emit(
                        E::new("CUSTOM")
                            .s("name", "flush")
                            .v("value", Value::Null)
                            .done(),
                    );
                }
                let want = if self.p(0.3) { 3 } else { 2 };
                while self.lanes_of(kind).len() < want {
                    let holders: Vec<Owner> =
                        self.lanes_of(kind).into_iter().map(|(o, _)| o).collect();
                    let mut candidates: Vec<String> = self.m.subs.0.clone();
                    candidates.extend(self.attr_tags.iter().cloned());
                    candidates.retain(|c| !holders.contains(&Some(c.clone())));
                    let tag = match self.pick(&candidates) {
                        Some(t) if self.p(0.6) => t,
                        _ => self.fresh("lane"),
                    };
                    self.open_chunk(kind, Some(Some(tag)));
                }
                let ev = E::new(kind.family().chunk).s("delta", "who?").done();
                self.commit(vec![ev], "chunk_ambiguous", tpl);
            }
            _ => unreachable!("{f:?} is not a chunk fault"),
        }
    }
}
