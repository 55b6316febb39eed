//! Verification, as `verifyEvents` does it, with the client's exact messages.

use serde_json::Value;

use super::mirror::Mirror;
use super::wire::{Owner, sget, tag_of, ty, who};

impl Mirror {
    fn tag_error(
        t: &str,
        tag: &Owner,
        owner: Option<&Owner>,
        kind: &str,
        id: &str,
    ) -> Result<(), String> {
        match (tag, owner) {
            (Some(tag), Some(owner)) if owner.as_deref() != Some(tag.as_str()) => Err(format!(
                "Cannot send '{t}': subagentRunId '{tag}' does not match the {kind} '{id}' opener's subagent '{}'.",
                who(owner)
            )),
            _ => Ok(()),
        }
    }

    pub(super) fn verify(&mut self, e: &Value) -> Result<(), String> {
        let t = ty(e).to_owned();
        let t = t.as_str();
        if self.run_error && t != "RUN_STARTED" {
            return Err(format!(
                "Cannot send event type '{t}': The run has already errored with 'RUN_ERROR'. No further events can be sent."
            ));
        }
        if self.run_finished && t != "RUN_ERROR" && t != "RUN_STARTED" {
            return Err(format!(
                "Cannot send event type '{t}': The run has already finished with 'RUN_FINISHED'. Start a new run with 'RUN_STARTED'."
            ));
        }
        if !self.first {
            self.first = true;
            if t != "RUN_STARTED" && t != "RUN_ERROR" {
                return Err("First event must be 'RUN_STARTED'".to_owned());
            }
        } else if t == "RUN_STARTED" {
            if self.run_started && !self.run_finished && !self.run_error {
                return Err("Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with 'RUN_FINISHED' before starting a new run.".to_owned());
            }
            if self.run_finished || self.run_error {
                self.reset();
            }
        }
        let tag = tag_of(e);
        let id = |key: &str| sget(e, key).unwrap_or("").to_owned();
        match t {
            "TEXT_MESSAGE_START" => {
                let id = id("messageId");
                if self.text.has(&id) {
                    return Err(format!(
                        "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '{id}' is already in progress. Complete it with 'TEXT_MESSAGE_END' first."
                    ));
                }
                let existing = self.own_msg.get(&id).cloned();
                Self::tag_error(t, &tag, existing.as_ref(), "message", &id)?;
                self.text.add(&id);
                self.own_msg.entry(id).or_insert(tag);
            }
            "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_END" => {
                let id = id("messageId");
                if !self.text.has(&id) {
                    return Err(if t == "TEXT_MESSAGE_CONTENT" {
                        format!(
                            "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID '{id}'. Start a text message with 'TEXT_MESSAGE_START' first."
                        )
                    } else {
                        format!(
                            "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID '{id}'. A 'TEXT_MESSAGE_START' event must be sent first."
                        )
                    });
                }
                Self::tag_error(t, &tag, self.own_msg.get(&id), "message", &id)?;
                if t == "TEXT_MESSAGE_END" {
                    self.text.delete(&id);
                }
            }
            "TOOL_CALL_START" => {
                let id = id("toolCallId");
                if self.tools.has(&id) {
                    return Err(format!(
                        "Cannot send 'TOOL_CALL_START' event: A tool call with ID '{id}' is already in progress. Complete it with 'TOOL_CALL_END' first."
                    ));
                }
                let parent = sget(e, "parentMessageId");
                let mut inherited: Option<Owner> = None;
                if let Some(parent) = parent
                    && let Some(parent_owner) = self.own_msg.get(parent)
                {
                    if tag.is_some() && tag != *parent_owner {
                        return Err(format!(
                            "Cannot send 'TOOL_CALL_START': subagentRunId '{}' does not match its parent message '{parent}' owner '{}'. A tool call belongs to the message that carries it.",
                            tag.as_deref().unwrap_or(""),
                            who(parent_owner)
                        ));
                    }
                    inherited = Some(parent_owner.clone());
                }
                let existing = self.own_tool.get(&id).cloned();
                if let Some(existing) = &existing {
                    Self::tag_error(t, &tag, Some(existing), "tool call", &id)?;
                    if let (None, Some(inherited)) = (&tag, &inherited)
                        && inherited != existing
                    {
                        return Err(format!(
                            "Cannot send 'TOOL_CALL_START': tool call '{id}' is owned by '{}' but its parent message '{}' is owned by '{}'. A tool call belongs to the message that carries it.",
                            who(existing),
                            parent.unwrap_or(""),
                            who(inherited)
                        ));
                    }
                }
                self.tools.add(&id);
                if existing.is_none() {
                    let owner = if tag.is_some() {
                        tag
                    } else {
                        inherited.unwrap_or(None)
                    };
                    self.own_tool.insert(id, owner);
                }
            }
            "TOOL_CALL_ARGS" | "TOOL_CALL_END" => {
                let id = id("toolCallId");
                if !self.tools.has(&id) {
                    return Err(if t == "TOOL_CALL_ARGS" {
                        format!(
                            "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID '{id}'. Start a tool call with 'TOOL_CALL_START' first."
                        )
                    } else {
                        format!(
                            "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID '{id}'. A 'TOOL_CALL_START' event must be sent first."
                        )
                    });
                }
                Self::tag_error(t, &tag, self.own_tool.get(&id), "tool call", &id)?;
                if t == "TOOL_CALL_END" {
                    self.tools.delete(&id);
                }
            }
            "STEP_STARTED" => {
                let name = id("stepName");
                if self.steps_for(&tag).contains(&name) {
                    let suffix = tag
                        .as_ref()
                        .map(|o| format!(" in subagent '{o}'"))
                        .unwrap_or_default();
                    return Err(format!(
                        "Step \"{name}\" is already active for 'STEP_STARTED'{suffix}"
                    ));
                }
                self.steps_for(&tag).push(name);
            }
            "STEP_FINISHED" => {
                let name = id("stepName");
                if !self.steps_for(&tag).contains(&name) {
                    let other = self
                        .steps
                        .iter()
                        .find(|(o, names)| *o != tag && names.contains(&name))
                        .map(|(o, _)| o.clone());
                    let label = |o: &Owner| match o {
                        Some(o) => format!("subagent '{o}'"),
                        None => "the parent agent".to_owned(),
                    };
                    return Err(match other {
                        Some(other) => format!(
                            "Cannot send 'STEP_FINISHED' for step \"{name}\" attributed to {}: that step is open under {}. A step must be finished by whoever started it.",
                            label(&tag),
                            label(&other)
                        ),
                        None => format!(
                            "Cannot send 'STEP_FINISHED' for step \"{name}\" that was not started"
                        ),
                    });
                }
                self.steps_for(&tag).retain(|n| *n != name);
            }
            "ACTIVITY_SNAPSHOT" => {
                let id = id("messageId");
                let is_new = !self.own_act.contains_key(&id);
                if is_new || e.get("replace") != Some(&Value::Bool(false)) {
                    self.own_act.insert(id, tag);
                }
            }
            "TOOL_CALL_RESULT" => {
                if let Some(mid) = sget(e, "messageId") {
                    self.own_msg.insert(mid.to_owned(), tag);
                }
            }
            "REASONING_START" | "REASONING_MESSAGE_START" => {
                let id = id("messageId");
                let span = t == "REASONING_START";
                let open = if span { &self.spans } else { &self.rmsgs };
                if open.has(&id) {
                    return Err(if span {
                        format!(
                            "Cannot send 'REASONING_START' event: A reasoning span with ID '{id}' is already in progress. Complete it with 'REASONING_END' first."
                        )
                    } else {
                        format!(
                            "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID '{id}' is already in progress. Complete it with 'REASONING_MESSAGE_END' first."
                        )
                    });
                }
                let existing = self.own_reason.get(&id).cloned();
                Self::tag_error(t, &tag, existing.as_ref(), "reasoning message", &id)?;
                if span {
                    self.spans.add(&id);
                } else {
                    self.rmsgs.add(&id);
                }
                self.own_reason.entry(id).or_insert(tag);
            }
            "REASONING_MESSAGE_CONTENT" | "REASONING_MESSAGE_END" | "REASONING_END" => {
                let id = id("messageId");
                let span = t == "REASONING_END";
                let open = if span { &self.spans } else { &self.rmsgs };
                if !open.has(&id) {
                    return Err(if span {
                        format!(
                            "Cannot send 'REASONING_END' event: No active reasoning span found with ID '{id}'. A 'REASONING_START' event must be sent first."
                        )
                    } else {
                        format!(
                            "Cannot send '{t}' event: No active reasoning message found with ID '{id}'. Start a reasoning message with 'REASONING_MESSAGE_START' first."
                        )
                    });
                }
                Self::tag_error(t, &tag, self.own_reason.get(&id), "reasoning message", &id)?;
                if span {
                    self.spans.delete(&id);
                } else if t == "REASONING_MESSAGE_END" {
                    self.rmsgs.delete(&id);
                }
            }
            "REASONING_ENCRYPTED_VALUE" => {
                let id = id("entityId");
                let (owner, label) = match sget(e, "subtype") {
                    Some("tool-call") => (self.own_tool.get(&id), "tool call"),
                    Some("message") => (
                        self.own_msg.get(&id).or_else(|| self.own_reason.get(&id)),
                        "message",
                    ),
                    _ => (self.own_reason.get(&id), "reasoning message"),
                };
                Self::tag_error(t, &tag, owner, label, &id)?;
            }
            "ACTIVITY_DELTA" => {
                let id = id("messageId");
                Self::tag_error(t, &tag, self.own_act.get(&id), "activity", &id)?;
            }
            "SUBAGENT_STARTED" => {
                let sid = id("subagentRunId");
                if self.subs.has(&sid) {
                    return Err(format!(
                        "Cannot send 'SUBAGENT_STARTED': subagent '{sid}' is already active. Finish it with 'SUBAGENT_FINISHED' first."
                    ));
                }
                if self.subs_closed.contains(&sid) {
                    return Err(format!(
                        "Cannot send 'SUBAGENT_STARTED': subagent '{sid}' has already finished in this run. Subagent IDs are per-invocation and cannot be reused."
                    ));
                }
                if let Some(parent) = sget(e, "parentSubagentRunId")
                    && !self.subs.has(parent)
                    && !self.subs_closed.contains(parent)
                {
                    return Err(format!(
                        "Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{parent}' has not been started in this run."
                    ));
                }
                self.subs.add(&sid);
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                let sid = id("subagentRunId");
                if !self.subs.has(&sid) {
                    return Err(format!(
                        "Cannot send '{t}': no active subagent found with ID '{sid}'. A 'SUBAGENT_STARTED' event must be sent first."
                    ));
                }
                self.subs.delete(&sid);
                self.subs_closed.insert(sid);
            }
            "MESSAGES_SNAPSHOT" => self.seed(e.get("messages"), true),
            "RUN_STARTED" => {
                self.run_started = true;
                self.seed(e.get("input").and_then(|i| i.get("messages")), false);
            }
            "RUN_FINISHED" => {
                if self.steps.iter().any(|(_, names)| !names.is_empty()) {
                    let parts: Vec<String> = self
                        .active_steps()
                        .into_iter()
                        .map(|(o, n)| match o {
                            Some(o) => format!("{n} (subagent '{o}')"),
                            None => n,
                        })
                        .collect();
                    return Err(format!(
                        "Cannot send 'RUN_FINISHED' while steps are still active: {}",
                        parts.join(", ")
                    ));
                }
                let checks = [
                    (&self.text, "text messages"),
                    (&self.rmsgs, "reasoning messages"),
                    (&self.spans, "reasoning spans"),
                    (&self.tools, "tool calls"),
                    (&self.subs, "subagents"),
                ];
                for (set, what) in checks {
                    if !set.is_empty() {
                        return Err(format!(
                            "Cannot send 'RUN_FINISHED' while {what} are still active: {}",
                            set.joined()
                        ));
                    }
                }
                self.run_finished = true;
            }
            "RUN_ERROR" => self.run_error = true,
            _ => {}
        }
        Ok(())
    }
}
