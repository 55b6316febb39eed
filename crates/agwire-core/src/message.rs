//! Messages of a conversation, discriminated by `role`.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::Metadata;
use crate::content::Content;
use crate::decode::{Cx, DResult, Decode, Fail, Obj, Path, expected, tag};

/// A message role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Developer instructions.
    Developer,
    /// System instructions.
    System,
    /// The agent.
    Assistant,
    /// The human.
    User,
    /// A tool's result.
    Tool,
    /// A frontend-only activity (progress, generative UI).
    Activity,
    /// Visible reasoning.
    Reasoning,
}

impl Role {
    /// Every role, in the schema's order.
    pub const ALL: [Role; 7] = [
        Role::Developer,
        Role::System,
        Role::Assistant,
        Role::User,
        Role::Tool,
        Role::Activity,
        Role::Reasoning,
    ];

    /// The role with this wire name.
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.as_str() == name)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Developer => "developer",
            Role::System => "system",
            Role::Assistant => "assistant",
            Role::User => "user",
            Role::Tool => "tool",
            Role::Activity => "activity",
            Role::Reasoning => "reasoning",
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// A developer message.
    Developer(TextMessage),
    /// A system message.
    System(TextMessage),
    /// An assistant message (text and/or tool calls).
    Assistant(AssistantMessage),
    /// A user message (text or parts).
    User(UserMessage),
    /// A tool result.
    Tool(ToolMessage),
    /// A frontend-only activity message.
    Activity(ActivityMessage),
    /// A reasoning message.
    Reasoning(ReasoningMessage),
}

/// The common shape of developer and system messages.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessage {
    /// Message id (opaque).
    pub id: String,
    /// The text.
    pub content: String,
    /// Speaker label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Provider-encrypted payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` is (1.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// The subagent that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// An assistant message.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Message id.
    pub id: String,
    /// The text, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Speaker label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tool calls the message carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Provider-encrypted payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` is (1.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// The subagent that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A user message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// Message id.
    pub id: String,
    /// Text or parts.
    pub content: Content,
    /// Speaker label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Provider-encrypted payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` is (1.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// The subagent that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A tool message: the result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMessage {
    /// Message id.
    pub id: String,
    /// The result: text or parts.
    pub content: Content,
    /// The call this answers.
    pub tool_call_id: String,
    /// Set when the tool failed (alongside `content`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Provider-encrypted payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` is (1.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// The subagent that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A frontend-only activity message.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityMessage {
    /// Message id.
    pub id: String,
    /// Open activity kind (`"a2ui-surface"`, `"PLAN"`, …).
    pub activity_type: String,
    /// The activity's structured content.
    pub content: Map<String, Value>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// The subagent that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A reasoning message.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessage {
    /// Message id.
    pub id: String,
    /// The visible reasoning text.
    pub content: String,
    /// Provider-encrypted reasoning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` is (1.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// The subagent that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A function call carried by an assistant message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCall {
    /// Tool call id.
    pub id: String,
    /// The function and its argument text.
    pub function: FunctionCall,
    /// Provider-encrypted payload.
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` is (1.1).
    pub encrypted_value_type: Option<String>,
    /// Tool-call metadata (lives on the call, not on the message).
    pub metadata: Option<Metadata>,
}

/// The function a tool call invokes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct FunctionCall {
    /// Tool name.
    pub name: String,
    /// Raw argument text (conventionally JSON; never parsed by the protocol).
    pub arguments: String,
}

impl ToolCall {
    /// A call of `name` with the given argument text.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
            ..Self::default()
        }
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry("function", &self.function)?;
        if let Some(v) = &self.encrypted_value {
            map.serialize_entry("encryptedValue", v)?;
        }
        if let Some(v) = &self.encrypted_value_type {
            map.serialize_entry("encryptedValueType", v)?;
        }
        if let Some(v) = &self.metadata {
            map.serialize_entry("metadata", v)?;
        }
        map.end()
    }
}

impl Message {
    /// The message id.
    pub fn id(&self) -> &str {
        match self {
            Message::Developer(m) | Message::System(m) => &m.id,
            Message::Assistant(m) => &m.id,
            Message::User(m) => &m.id,
            Message::Tool(m) => &m.id,
            Message::Activity(m) => &m.id,
            Message::Reasoning(m) => &m.id,
        }
    }

    /// The role.
    pub fn role(&self) -> Role {
        match self {
            Message::Developer(_) => Role::Developer,
            Message::System(_) => Role::System,
            Message::Assistant(_) => Role::Assistant,
            Message::User(_) => Role::User,
            Message::Tool(_) => Role::Tool,
            Message::Activity(_) => Role::Activity,
            Message::Reasoning(_) => Role::Reasoning,
        }
    }

    /// The metadata, if any.
    pub fn metadata(&self) -> Option<&Metadata> {
        match self {
            Message::Developer(m) | Message::System(m) => m.metadata.as_ref(),
            Message::Assistant(m) => m.metadata.as_ref(),
            Message::User(m) => m.metadata.as_ref(),
            Message::Tool(m) => m.metadata.as_ref(),
            Message::Activity(m) => m.metadata.as_ref(),
            Message::Reasoning(m) => m.metadata.as_ref(),
        }
    }

    /// Mutable metadata slot.
    pub fn metadata_mut(&mut self) -> &mut Option<Metadata> {
        match self {
            Message::Developer(m) | Message::System(m) => &mut m.metadata,
            Message::Assistant(m) => &mut m.metadata,
            Message::User(m) => &mut m.metadata,
            Message::Tool(m) => &mut m.metadata,
            Message::Activity(m) => &mut m.metadata,
            Message::Reasoning(m) => &mut m.metadata,
        }
    }

    /// The subagent that produced the message, if attributed.
    pub fn subagent_run_id(&self) -> Option<&str> {
        match self {
            Message::Developer(m) | Message::System(m) => m.subagent_run_id.as_deref(),
            Message::Assistant(m) => m.subagent_run_id.as_deref(),
            Message::User(m) => m.subagent_run_id.as_deref(),
            Message::Tool(m) => m.subagent_run_id.as_deref(),
            Message::Activity(m) => m.subagent_run_id.as_deref(),
            Message::Reasoning(m) => m.subagent_run_id.as_deref(),
        }
    }

    /// The encrypted value and its type, for roles that carry one.
    pub fn encrypted_slots(&mut self) -> Option<(&mut Option<String>, &mut Option<String>)> {
        match self {
            Message::Developer(m) | Message::System(m) => {
                Some((&mut m.encrypted_value, &mut m.encrypted_value_type))
            }
            Message::Assistant(m) => Some((&mut m.encrypted_value, &mut m.encrypted_value_type)),
            Message::User(m) => Some((&mut m.encrypted_value, &mut m.encrypted_value_type)),
            Message::Tool(m) => Some((&mut m.encrypted_value, &mut m.encrypted_value_type)),
            Message::Reasoning(m) => Some((&mut m.encrypted_value, &mut m.encrypted_value_type)),
            Message::Activity(_) => None,
        }
    }

    /// A user message with text content.
    pub fn user(id: impl Into<String>, content: impl Into<Content>) -> Self {
        Message::User(UserMessage {
            id: id.into(),
            content: content.into(),
            name: None,
            encrypted_value: None,
            encrypted_value_type: None,
            metadata: None,
            subagent_run_id: None,
        })
    }

    /// An assistant message with text content.
    pub fn assistant(id: impl Into<String>, content: impl Into<String>) -> Self {
        Message::Assistant(AssistantMessage {
            id: id.into(),
            content: Some(content.into()),
            ..AssistantMessage::default()
        })
    }

    /// A system message.
    pub fn system(id: impl Into<String>, content: impl Into<String>) -> Self {
        Message::System(TextMessage {
            id: id.into(),
            content: content.into(),
            ..TextMessage::default()
        })
    }

    /// A tool message answering `tool_call_id`.
    pub fn tool(
        id: impl Into<String>,
        tool_call_id: impl Into<String>,
        content: impl Into<Content>,
    ) -> Self {
        Message::Tool(ToolMessage {
            id: id.into(),
            content: content.into(),
            tool_call_id: tool_call_id.into(),
            error: None,
            encrypted_value: None,
            encrypted_value_type: None,
            metadata: None,
            subagent_run_id: None,
        })
    }

    /// Removes the subagent attribution (for a peer that predates subagents).
    pub fn clear_subagent_run_id(&mut self) {
        let slot = match self {
            Message::Developer(m) | Message::System(m) => &mut m.subagent_run_id,
            Message::Assistant(m) => &mut m.subagent_run_id,
            Message::User(m) => &mut m.subagent_run_id,
            Message::Tool(m) => &mut m.subagent_run_id,
            Message::Activity(m) => &mut m.subagent_run_id,
            Message::Reasoning(m) => &mut m.subagent_run_id,
        };
        *slot = None;
    }

    /// Removes members a 1.0 peer does not know (`encryptedValueType`).
    pub(crate) fn strip_1_1(&mut self) {
        if let Some((_, ty)) = self.encrypted_slots() {
            *ty = None;
        }
        if let Message::Assistant(m) = self {
            for call in m.tool_calls.iter_mut().flatten() {
                call.encrypted_value_type = None;
            }
        }
    }
}

impl Decode for Message {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let Value::Object(map) = value else {
            return Err(cx.error(path, expected("object", &value)));
        };
        let role = match tag(&map, "role") {
            Some("developer") => Role::Developer,
            Some("system") => Role::System,
            Some("assistant") => Role::Assistant,
            Some("user") => Role::User,
            Some("tool") => Role::Tool,
            Some("activity") => Role::Activity,
            Some("reasoning") => Role::Reasoning,
            _ => return Err(Fail::Drop { tag: "role" }),
        };
        let mut o = Obj::from_map(map, cx, path);
        o.take("role");
        let message = match role {
            Role::Developer | Role::System => {
                let m = TextMessage {
                    subagent_run_id: o.opt(cx, "subagentRunId")?,
                    id: o.req(cx, "id")?,
                    name: o.opt(cx, "name")?,
                    encrypted_value: o.opt(cx, "encryptedValue")?,
                    encrypted_value_type: o.opt(cx, "encryptedValueType")?,
                    metadata: o.opt(cx, "metadata")?,
                    content: o.req(cx, "content")?,
                };
                if role == Role::Developer {
                    Message::Developer(m)
                } else {
                    Message::System(m)
                }
            }
            Role::Assistant => Message::Assistant(AssistantMessage {
                subagent_run_id: o.opt(cx, "subagentRunId")?,
                id: o.req(cx, "id")?,
                name: o.opt(cx, "name")?,
                encrypted_value: o.opt(cx, "encryptedValue")?,
                encrypted_value_type: o.opt(cx, "encryptedValueType")?,
                metadata: o.opt(cx, "metadata")?,
                content: o.opt(cx, "content")?,
                tool_calls: o.opt(cx, "toolCalls")?,
            }),
            Role::User => Message::User(UserMessage {
                subagent_run_id: o.opt(cx, "subagentRunId")?,
                id: o.req(cx, "id")?,
                name: o.opt(cx, "name")?,
                encrypted_value: o.opt(cx, "encryptedValue")?,
                encrypted_value_type: o.opt(cx, "encryptedValueType")?,
                metadata: o.opt(cx, "metadata")?,
                content: o.req(cx, "content")?,
            }),
            Role::Tool => Message::Tool(ToolMessage {
                subagent_run_id: o.opt(cx, "subagentRunId")?,
                id: o.req(cx, "id")?,
                content: o.req(cx, "content")?,
                tool_call_id: o.req(cx, "toolCallId")?,
                error: o.opt(cx, "error")?,
                encrypted_value: o.opt(cx, "encryptedValue")?,
                encrypted_value_type: o.opt(cx, "encryptedValueType")?,
                metadata: o.opt(cx, "metadata")?,
            }),
            Role::Activity => Message::Activity(ActivityMessage {
                subagent_run_id: o.opt(cx, "subagentRunId")?,
                id: o.req(cx, "id")?,
                activity_type: o.req(cx, "activityType")?,
                content: o.req(cx, "content")?,
                metadata: o.opt(cx, "metadata")?,
            }),
            Role::Reasoning => Message::Reasoning(ReasoningMessage {
                subagent_run_id: o.opt(cx, "subagentRunId")?,
                id: o.req(cx, "id")?,
                content: o.req(cx, "content")?,
                encrypted_value: o.opt(cx, "encryptedValue")?,
                encrypted_value_type: o.opt(cx, "encryptedValueType")?,
                metadata: o.opt(cx, "metadata")?,
            }),
        };
        o.finish(cx)?;
        Ok(message)
    }
}

impl Decode for ToolCall {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let call = ToolCall {
            id: o.req(cx, "id")?,
            function: {
                o.req_literal(cx, "type", "function")?;
                o.req(cx, "function")?
            },
            encrypted_value: o.opt(cx, "encryptedValue")?,
            encrypted_value_type: o.opt(cx, "encryptedValueType")?,
            metadata: o.opt(cx, "metadata")?,
        };
        o.finish(cx)?;
        Ok(call)
    }
}

impl Decode for FunctionCall {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let f = FunctionCall {
            name: o.req(cx, "name")?,
            arguments: o.req(cx, "arguments")?,
        };
        o.finish(cx)?;
        Ok(f)
    }
}
