#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod apply;
pub mod capabilities;
pub mod chunk;
pub mod compact;
pub mod compat;
pub mod content;
pub mod decode;
mod error;
pub mod event;
pub mod input;
pub mod message;
pub mod outcome;
pub mod patch;
pub mod pipeline;
pub mod usage;
pub mod verify;
pub mod version;
mod warning;

pub use capabilities::AgentCapabilities;
pub use content::{Content, ContentPart, MediaPart, PartSource, TextPart};
pub use decode::{DecodeError, DecodeMode, Decoded};
pub use error::Error;
pub use event::*;
pub use input::{Context, ResumeEntry, ResumeStatus, RunAgentInput, Tool};
pub use message::{
    ActivityMessage, AssistantMessage, FunctionCall, Message, ReasoningMessage, Role, TextMessage,
    ToolCall, ToolMessage, UserMessage,
};
pub use outcome::{Interrupt, RunFinishedOutcome, SubagentFinishedOutcome};
pub use patch::{JsonPatch, PatchOp, PatchOperation};
pub use usage::TokenUsage;
pub use version::{PROTOCOL_VERSION, ProtocolVersion};
pub use warning::{Warning, WarningKind};

/// Open metadata: any JSON under any key (`null` values included).
pub type Metadata = serde_json::Map<String, serde_json::Value>;

decode::protocol_type! {
    Event => "Event",
    Message => "Message",
    RunAgentInput => "RunAgentInput",
    Tool => "Tool",
    Context => "Context",
    ResumeEntry => "ResumeEntry",
    Interrupt => "Interrupt",
    RunFinishedOutcome => "RunFinishedOutcome",
    SubagentFinishedOutcome => "SubagentFinishedOutcome",
    TokenUsage => "TokenUsage",
    ContentPart => "ContentPart",
    Content => "Content",
    PatchOperation => "JsonPatchOperation",
    ToolCall => "ToolCall",
    AgentCapabilities => "AgentCapabilities",
}
