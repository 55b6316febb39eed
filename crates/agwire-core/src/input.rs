//! The request body of a run: [`RunAgentInput`] and what it carries.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::Metadata;
use crate::decode::{Cx, DResult, Decode, NonNullJson, Obj, Path};
use crate::message::Message;

/// Everything an agent is given for one run.
///
/// `tools` and `context` are always serialized (an empty list when there are
/// none): the 1.x schema makes them optional, but pre-1.0 servers still require
/// them, and the official client always sends them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation this run belongs to.
    pub thread_id: String,
    /// This run.
    pub run_id: String,
    /// The run that spawned this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The protocol version the consumer speaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The state the run starts from (absent means `{}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools the agent may call.
    pub tools: Vec<Tool>,
    /// Ambient context.
    pub context: Vec<Context>,
    /// Application-specific values, passed through untouched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forwarded_props: Option<Value>,
    /// Answers to the interrupts of a previous run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<ResumeEntry>>,
}

impl RunAgentInput {
    /// An input with the given ids and nothing else.
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            parent_run_id: None,
            protocol_version: None,
            state: None,
            messages: Vec::new(),
            tools: Vec::new(),
            context: Vec::new(),
            forwarded_props: None,
            resume: None,
        }
    }

    /// The input a consumer sends for a new run, shaped as the official client
    /// shapes it: `state`, `tools`, `context` and `forwardedProps` always present
    /// (pre-1.0 servers require them), activity messages left out (they are the
    /// consumer's own), and `protocolVersion` declaring ours.
    pub fn prepare(
        thread_id: impl Into<String>,
        run_id: impl Into<String>,
        messages: &[Message],
        state: &Value,
    ) -> Self {
        Self {
            protocol_version: Some(crate::PROTOCOL_VERSION.to_owned()),
            state: if state.is_null() {
                None
            } else {
                Some(state.clone())
            },
            messages: messages
                .iter()
                .filter(|m| m.role() != crate::Role::Activity)
                .cloned()
                .collect(),
            forwarded_props: Some(Value::Object(Map::new())),
            ..Self::new(thread_id, run_id)
        }
    }

    /// Adapts the input to a producer known to speak at most `ceiling` (see
    /// [`PeerCeiling`](crate::compat::PeerCeiling)); warnings name what a very old
    /// peer cannot receive. An uncomparable ceiling changes nothing.
    pub fn for_peer_ceiling(mut self, ceiling: &str) -> (Self, Vec<crate::Warning>) {
        let warnings = match crate::compat::PeerCeiling::parse(ceiling) {
            Some(peer) => peer.downgrade_input(&mut self),
            None => Vec::new(),
        };
        (self, warnings)
    }

    pub(crate) fn strip_1_1(&mut self) {
        for message in &mut self.messages {
            message.strip_1_1();
        }
    }
}

/// A tool the agent may call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Tool name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Conventionally a JSON Schema of the arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A piece of ambient context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Context {
    /// What the value is.
    pub description: String,
    /// The value.
    pub value: String,
}

/// Whether an interrupt was answered or abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    /// Answered; `payload` carries the answer.
    Resolved,
    /// Abandoned.
    Cancelled,
}

/// One answer to an interrupt.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    /// The interrupt answered.
    pub interrupt_id: String,
    /// Resolved or cancelled.
    pub status: ResumeStatus,
    /// The answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Decode for RunAgentInput {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let input = RunAgentInput {
            thread_id: o.req(cx, "threadId")?,
            run_id: o.req(cx, "runId")?,
            protocol_version: o.opt(cx, "protocolVersion")?,
            parent_run_id: o.opt(cx, "parentRunId")?,
            // `state: null` is read as absent by every SDK, so it is not a
            // legacy tolerance here; the 1.1 schema alone forbids it.
            state: match o.take("state") {
                Some(Value::Null) if cx.lenient() => None,
                Some(v) => Some(NonNullJson::decode(v, cx, &o.path().key("state"))?.0),
                None => None,
            },
            messages: o.req(cx, "messages")?,
            tools: o.opt(cx, "tools")?.unwrap_or_default(),
            context: o.opt(cx, "context")?.unwrap_or_default(),
            forwarded_props: o
                .opt_legacy_null::<NonNullJson>(cx, "forwardedProps")?
                .map(|v| v.0),
            resume: o.opt(cx, "resume")?,
        };
        o.finish(cx)?;
        Ok(input)
    }
}

impl Decode for Tool {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let tool = Tool {
            name: o.req(cx, "name")?,
            description: o.req(cx, "description")?,
            parameters: o
                .opt_legacy_null::<NonNullJson>(cx, "parameters")?
                .map(|v| v.0),
            metadata: o.opt(cx, "metadata")?,
        };
        o.finish(cx)?;
        Ok(tool)
    }
}

impl Decode for Context {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let context = Context {
            description: o.req(cx, "description")?,
            value: o.req(cx, "value")?,
        };
        o.finish(cx)?;
        Ok(context)
    }
}

impl Decode for ResumeStatus {
    const EXPECTED: &'static str = "\"resolved\" | \"cancelled\"";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        match value.as_str() {
            Some("resolved") => Ok(ResumeStatus::Resolved),
            Some("cancelled") => Ok(ResumeStatus::Cancelled),
            _ => Err(cx.error(
                path,
                "Invalid option: expected one of \"resolved\"|\"cancelled\"",
            )),
        }
    }
}

impl Decode for ResumeEntry {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let entry = ResumeEntry {
            interrupt_id: o.req(cx, "interruptId")?,
            status: o.req(cx, "status")?,
            payload: o
                .opt_legacy_null::<NonNullJson>(cx, "payload")?
                .map(|v| v.0),
            metadata: o.opt::<Map<String, Value>>(cx, "metadata")?,
        };
        o.finish(cx)?;
        Ok(entry)
    }
}
