//! Chunk expansion, as `transformChunks` does it: chunk lanes per owner, and
//! the start/content/end events a chunk stands for.

use serde_json::Value;

use super::mirror::{Mirror, Pending};
use super::schema::Kind;
use super::wire::{E, Owner, sget, tag_of, ty, who};

impl Mirror {
    pub(super) fn lane(&self, owner: &Owner) -> Option<&Pending> {
        self.lanes.iter().find(|(o, _)| o == owner).map(|(_, p)| p)
    }

    fn lane_holding(&self, kind: Kind, id: &str) -> Option<Owner> {
        self.lanes
            .iter()
            .find(|(_, p)| p.kind == kind && p.id == id)
            .map(|(o, _)| o.clone())
    }

    pub(super) fn lane_held(&self, kind: Kind, id: &str) -> bool {
        self.lane_holding(kind, id).is_some()
    }

    fn close_lane(&mut self, owner: &Owner) -> Vec<Value> {
        let Some(pos) = self.lanes.iter().position(|(o, _)| o == owner) else {
            return Vec::new();
        };
        let (_, p) = self.lanes.remove(pos);
        vec![
            E::new(p.kind.family().end)
                .s(p.kind.family().id_field, p.id)
                .tag(&p.tag)
                .done(),
        ]
    }

    fn close_all_lanes(&mut self) -> Vec<Value> {
        let owners: Vec<Owner> = self.lanes.iter().map(|(o, _)| o.clone()).collect();
        owners.iter().flat_map(|o| self.close_lane(o)).collect()
    }

    pub(super) fn resolve_lane(
        &self,
        kind: Kind,
        id: Option<&str>,
        tag: &Owner,
    ) -> Result<Owner, String> {
        if let Some(id) = id {
            if let Some(holder) = self.lane_holding(kind, id) {
                if let Some(t) = tag
                    && Some(t) != holder.as_ref()
                {
                    return Err(format!(
                        "Cannot continue {} '{id}': chunk subagentRunId '{t}' does not match the open stream's subagent '{}'.",
                        kind.family().entity,
                        who(&holder)
                    ));
                }
                return Ok(holder);
            }
            return Ok(tag.clone());
        }
        if tag.is_some() {
            return Ok(tag.clone());
        }
        if self.lane(&None).is_some_and(|p| p.kind == kind) {
            return Ok(None);
        }
        let candidates: Vec<&Owner> = self
            .lanes
            .iter()
            .filter(|(_, p)| p.kind == kind)
            .map(|(o, _)| o)
            .collect();
        match candidates.len() {
            0 => Ok(None),
            1 => Ok(candidates[0].clone()),
            n => Err(format!(
                "Ambiguous {}: it carries neither a {} nor a subagentRunId, but {n} lanes have an open {}. Attribute the chunk to the subagent it belongs to.",
                kind.family().chunk,
                kind.family().id_field,
                kind.family().entity
            )),
        }
    }

    pub(super) fn transform(&mut self, e: &Value) -> Result<Vec<Value>, String> {
        match ty(e) {
            "TEXT_MESSAGE_START"
            | "TEXT_MESSAGE_CONTENT"
            | "TEXT_MESSAGE_END"
            | "TOOL_CALL_START"
            | "TOOL_CALL_ARGS"
            | "TOOL_CALL_END"
            | "TOOL_CALL_RESULT"
            | "STATE_SNAPSHOT"
            | "STATE_DELTA"
            | "CUSTOM"
            | "STEP_STARTED"
            | "STEP_FINISHED"
            | "REASONING_START"
            | "REASONING_MESSAGE_START"
            | "REASONING_MESSAGE_CONTENT"
            | "REASONING_MESSAGE_END"
            | "REASONING_END" => {
                let mut out = self.close_lane(&tag_of(e));
                out.push(e.clone());
                Ok(out)
            }
            "RUN_STARTED" | "RUN_FINISHED" | "RUN_ERROR" | "MESSAGES_SNAPSHOT" => {
                let mut out = self.close_all_lanes();
                out.push(e.clone());
                Ok(out)
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                let mut out = match sget(e, "subagentRunId") {
                    Some(id) => self.close_lane(&Some(id.to_owned())),
                    None => Vec::new(),
                };
                out.push(e.clone());
                Ok(out)
            }
            "TEXT_MESSAGE_CHUNK" => self.chunk(e, Kind::Text),
            "TOOL_CALL_CHUNK" => self.chunk(e, Kind::Tool),
            "REASONING_MESSAGE_CHUNK" => self.chunk(e, Kind::Reasoning),
            _ => Ok(vec![e.clone()]),
        }
    }

    fn chunk(&mut self, e: &Value, kind: Kind) -> Result<Vec<Value>, String> {
        let id = sget(e, kind.family().id_field);
        let tag = tag_of(e);
        let lane = self.resolve_lane(kind, id, &tag)?;
        let mut out = Vec::new();
        let open = self.lane(&lane).cloned();
        let fields = match open {
            Some(p) if p.kind == kind && (id.is_none() || id == Some(p.id.as_str())) => {
                let agree = |field: &str, incoming: Option<&str>, established: Option<&str>| {
                    match incoming {
                        Some(inc) if Some(inc) != established => Err(format!(
                            "Cannot continue {} '{}': chunk {field} '{inc}' does not match the open stream's {field} {}.",
                            kind.family().entity,
                            p.id,
                            established.map_or_else(|| "(absent)".to_owned(), |s| format!("'{s}'"))
                        )),
                        _ => Ok(()),
                    }
                };
                match kind {
                    Kind::Text => {
                        agree("role", sget(e, "role"), Some(&p.role))?;
                        agree("name", sget(e, "name"), p.name.as_deref())?;
                    }
                    Kind::Tool => {
                        agree("toolCallName", sget(e, "toolCallName"), Some(&p.tool_name))?;
                        agree(
                            "parentMessageId",
                            sget(e, "parentMessageId"),
                            p.parent.as_deref(),
                        )?;
                    }
                    Kind::Reasoning => {}
                }
                p
            }
            _ => {
                out.extend(self.close_lane(&lane));
                let Some(id) = id else {
                    return Err(format!(
                        "First {} must have a {}",
                        kind.family().chunk,
                        kind.family().id_field
                    ));
                };
                if kind == Kind::Tool && sget(e, "toolCallName").is_none() {
                    return Err("First TOOL_CALL_CHUNK must have a toolCallName".to_owned());
                }
                let p = Pending {
                    kind,
                    id: id.to_owned(),
                    role: sget(e, "role").unwrap_or("assistant").to_owned(),
                    name: sget(e, "name").map(str::to_owned),
                    tool_name: sget(e, "toolCallName").unwrap_or("").to_owned(),
                    parent: sget(e, "parentMessageId").map(str::to_owned),
                    tag: tag.clone(),
                };
                self.lanes.push((lane, p.clone()));
                let start = E::new(kind.family().start).s(kind.family().id_field, id);
                let start = match kind {
                    Kind::Text => start
                        .s("role", p.role.clone())
                        .os("name", p.name.as_deref()),
                    Kind::Tool => start
                        .s("toolCallName", p.tool_name.clone())
                        .os("parentMessageId", p.parent.as_deref()),
                    Kind::Reasoning => start.s("role", "reasoning"),
                };
                out.push(
                    start
                        .tag(&tag)
                        .ov("metadata", e.get("metadata").cloned())
                        .done(),
                );
                p
            }
        };
        let content_type = kind.family().content;
        let owner = if tag.is_some() {
            tag
        } else {
            fields.tag.clone()
        };
        let delta = e.get("delta");
        let raw = e.get("rawEvent");
        let metadata = e.get("metadata");
        if delta.is_some() || raw.is_some() || (out.is_empty() && metadata.is_some()) {
            out.push(
                E::new(content_type)
                    .s(kind.family().id_field, fields.id)
                    .v(
                        "delta",
                        delta
                            .cloned()
                            .unwrap_or_else(|| Value::String(String::new())),
                    )
                    .tag(&owner)
                    .ov("metadata", metadata.cloned())
                    .ov("rawEvent", raw.cloned())
                    .done(),
            );
        }
        Ok(out)
    }
}
