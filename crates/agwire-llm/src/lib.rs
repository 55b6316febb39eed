#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "agui")]
#[cfg_attr(docsrs, doc(cfg(feature = "agui")))]
pub mod agui;
mod chat;
mod error;
#[cfg(feature = "local")]
#[cfg_attr(docsrs, doc(cfg(feature = "local")))]
pub mod local;
mod openai;
mod scripted;
pub mod telemetry;

pub use chat::{
    BoxFuture, ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream,
    FinishReason, ModelInfo, ToolCall, ToolChoice, ToolSpec, Usage, UserPart, collect,
};
pub use error::Error;
pub use openai::{OpenAiCompatible, OpenAiConfig};
pub use scripted::{ScriptedModel, ScriptedReply};
