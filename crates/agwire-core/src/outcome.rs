//! How runs and subagents end: outcomes and interrupts.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::Metadata;
use crate::decode::{Cx, DResult, Decode, Fail, Obj, Path, expected, tag};

/// How a run ended (`RUN_FINISHED.outcome`; absent means success).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RunFinishedOutcome {
    /// The run completed.
    Success {
        /// Frontend tool calls started and not yet answered, in order.
        #[serde(rename = "pendingToolCallIds", skip_serializing_if = "Option::is_none")]
        pending_tool_call_ids: Option<Vec<String>>,
    },
    /// The run suspended on interrupts; the next run resumes them.
    Interrupt {
        /// At least one interrupt.
        interrupts: Vec<Interrupt>,
    },
    /// The run was stopped on purpose.
    Cancelled,
}

/// A request for outside input that suspended a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    /// Unique within the run.
    pub id: String,
    /// Open reason (`tool_call`, `input_required`, `confirmation`, `<framework>:<name>`).
    pub reason: String,
    /// Human-readable prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The tool call this interrupt is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// JSON Schema of the expected resume payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Map<String, Value>>,
    /// Conventionally ISO-8601; not validated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// The subagent that raised it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

impl Interrupt {
    /// An interrupt with an id and a reason.
    pub fn new(id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            reason: reason.into(),
            message: None,
            tool_call_id: None,
            response_schema: None,
            expires_at: None,
            metadata: None,
            subagent_run_id: None,
        }
    }
}

/// How a subagent ended (`SUBAGENT_FINISHED.outcome`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SubagentFinishedOutcome {
    /// Completed.
    Success,
    /// Suspended on interrupts of the run.
    Suspended {
        /// The interrupts it waits on.
        #[serde(rename = "interruptIds", skip_serializing_if = "Option::is_none")]
        interrupt_ids: Option<Vec<String>>,
    },
}

impl Decode for RunFinishedOutcome {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let Value::Object(map) = value else {
            return Err(cx.error(path, expected("object", &value)));
        };
        let kind = match tag(&map, "type") {
            Some("success") => 0,
            Some("interrupt") => 1,
            Some("cancelled") => 2,
            _ => return Err(Fail::Drop { tag: "type" }),
        };
        let mut o = Obj::from_map(map, cx, path);
        o.take("type");
        let outcome = match kind {
            0 => RunFinishedOutcome::Success {
                pending_tool_call_ids: o.opt(cx, "pendingToolCallIds")?,
            },
            1 => {
                let interrupts: Vec<Interrupt> = o.req(cx, "interrupts")?;
                if interrupts.is_empty() {
                    return Err(cx.error(
                        &path.key("interrupts"),
                        "outcome 'interrupt' requires at least one interrupt",
                    ));
                }
                RunFinishedOutcome::Interrupt { interrupts }
            }
            _ => RunFinishedOutcome::Cancelled,
        };
        o.finish(cx)?;
        Ok(outcome)
    }
}

impl Decode for SubagentFinishedOutcome {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let Value::Object(map) = value else {
            return Err(cx.error(path, expected("object", &value)));
        };
        let suspended = match tag(&map, "type") {
            Some("success") => false,
            Some("suspended") => true,
            _ => return Err(Fail::Drop { tag: "type" }),
        };
        let mut o = Obj::from_map(map, cx, path);
        o.take("type");
        let outcome = if suspended {
            SubagentFinishedOutcome::Suspended {
                interrupt_ids: o.opt(cx, "interruptIds")?,
            }
        } else {
            SubagentFinishedOutcome::Success
        };
        o.finish(cx)?;
        Ok(outcome)
    }
}

impl Decode for Interrupt {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let interrupt = Interrupt {
            subagent_run_id: o.opt(cx, "subagentRunId")?,
            id: o.req(cx, "id")?,
            reason: o.req(cx, "reason")?,
            message: o.opt(cx, "message")?,
            tool_call_id: o.opt(cx, "toolCallId")?,
            response_schema: o.opt(cx, "responseSchema")?,
            expires_at: o.opt(cx, "expiresAt")?,
            metadata: o.opt(cx, "metadata")?,
        };
        o.finish(cx)?;
        Ok(interrupt)
    }
}
