#![doc = include_str!("../README.md")]

mod chat;
mod error;
#[cfg(feature = "local")]
pub mod local;
mod openai;
mod scripted;

pub use chat::{
    BoxFuture, ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream,
    FinishReason, ToolCall, ToolChoice, ToolSpec, Usage, UserPart, collect,
};
pub use error::Error;
pub use openai::{OpenAiCompatible, OpenAiConfig};
pub use scripted::{ScriptedModel, ScriptedReply};
