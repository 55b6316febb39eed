//! Provider-neutral chat requests, the streamed answer, and the trait every
//! model implements.

use std::future::Future;
use std::pin::Pin;

use futures_core::Stream;
use futures_util::StreamExt;
use serde_json::Value;

use crate::error::Error;

/// A boxed future (the trait is object-safe: the service holds
/// `Arc<dyn ChatModel>`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The streamed answer. Dropping it cancels the call: the upstream
/// connection closes.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<ChatEvent, Error>> + Send>>;

/// A chat model.
pub trait ChatModel: Send + Sync + std::fmt::Debug {
    /// What it is (`"openai:gpt-4o-mini"`, `"scripted"`).
    fn name(&self) -> &str;
    /// Starts a call; the stream carries the answer.
    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatStream, Error>>;
    /// What telemetry says of it ([`crate::telemetry::Traced`]): by
    /// default read from [`ChatModel::name`], `provider:model`.
    fn info(&self) -> ModelInfo {
        ModelInfo::from_name(self.name())
    }
}

/// A shared model is a model (`Arc<dyn ChatModel>` wraps like any other).
impl<M: ChatModel + ?Sized> ChatModel for std::sync::Arc<M> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatStream, Error>> {
        (**self).stream(request)
    }

    fn info(&self) -> ModelInfo {
        (**self).info()
    }
}

/// A model as the OpenTelemetry GenAI conventions describe it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ModelInfo {
    /// `gen_ai.provider.name` (`openai` for any OpenAI-compatible API).
    pub provider: String,
    /// The model a request that names none gets (`gen_ai.request.model`).
    pub model: String,
    /// Where calls go (`server.address`, `server.port`); `None` in-process.
    pub server: Option<(String, u16)>,
}

impl ModelInfo {
    /// `provider:model` (a name without `:` is both).
    pub fn from_name(name: &str) -> Self {
        let (provider, model) = name.split_once(':').unwrap_or((name, name));
        Self {
            provider: provider.to_owned(),
            model: model.to_owned(),
            server: None,
        }
    }

    /// With the server calls go to.
    pub fn server(mut self, host: impl Into<String>, port: u16) -> Self {
        self.server = Some((host.into(), port));
        self
    }
}

/// One call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    /// The model (`None`: the provider's configured one).
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Whether it must, may or may not call them.
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Output limit.
    pub max_tokens: Option<u32>,
    /// Answer with a JSON object (`response_format: json_object`).
    pub json_mode: bool,
    /// The JSON Schema the answer must satisfy, where the model can be held
    /// to one (the local model decodes under it; providers get `json_mode`).
    pub response_schema: Option<Value>,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMessage {
    /// Instructions.
    System(String),
    /// The user: text and images.
    User {
        /// Its parts.
        content: Vec<UserPart>,
    },
    /// The model's earlier turn.
    Assistant {
        /// What it said.
        content: Option<String>,
        /// What it reasoned (not sent back to providers that reject it).
        reasoning: Option<String>,
        /// The tools it called.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's answer.
    Tool {
        /// The call it answers.
        tool_call_id: String,
        /// The answer.
        content: String,
    },
}

impl ChatMessage {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::System(text.into())
    }

    /// A user message of plain text.
    pub fn user(text: impl Into<String>) -> Self {
        Self::User {
            content: vec![UserPart::Text(text.into())],
        }
    }
}

/// Part of a user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserPart {
    /// Text.
    Text(String),
    /// An image by URL (`https:` or `data:`).
    ImageUrl(String),
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// Its id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments (JSON text, as the model wrote it).
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: Value,
}

/// Whether the model calls tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// Its choice.
    Auto,
    /// Never.
    None,
    /// At least one.
    Required,
    /// This one.
    Named(String),
}

/// Token counts (`#[non_exhaustive]`: providers report new kinds of
/// tokens; a [`ChatModel`] of your own builds it with [`Usage::new`] and
/// sets the rest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Both.
    pub total_tokens: u64,
    /// Reasoning tokens, when reported.
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens served from cache, when reported.
    pub cached_tokens: Option<u64>,
}

impl Usage {
    /// `prompt` tokens in, `completion` tokens out (the total their sum);
    /// the rest unreported.
    pub fn new(prompt: u64, completion: u64) -> Self {
        Self {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            reasoning_tokens: None,
            cached_tokens: None,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// Done.
    Stop,
    /// Out of tokens.
    Length,
    /// It called tools and waits for their answers.
    ToolCalls,
    /// Filtered.
    ContentFilter,
    /// Something else the provider said.
    Other(String),
}

/// A piece of the streamed answer.
///
/// Guarantees: each tool call has exactly one `ToolCallStart` (non-empty id
/// and name) before any of its `ToolCallArgs`; indexes are 0, 1, 2, … in
/// start order; `Usage` comes at most once; on success `Finish` comes
/// exactly once, last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatEvent {
    /// Answer text.
    TextDelta(String),
    /// Reasoning text (DeepSeek `reasoning_content`, `reasoning`).
    ReasoningDelta(String),
    /// A tool call begins.
    ToolCallStart {
        /// Its position among this answer's calls.
        index: usize,
        /// Its id.
        id: String,
        /// The tool.
        name: String,
    },
    /// A piece of a call's JSON arguments.
    ToolCallArgs {
        /// Which call.
        index: usize,
        /// The piece.
        delta: String,
    },
    /// Token counts.
    Usage(Usage),
    /// The end.
    Finish(FinishReason),
}

/// A whole answer (`#[non_exhaustive]`: read it; [`collect`] builds it).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ChatResponse {
    /// The text.
    pub text: String,
    /// The reasoning.
    pub reasoning: String,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts.
    pub usage: Option<Usage>,
    /// Why it stopped.
    pub finish: FinishReason,
}

/// Reads a stream to its end.
pub async fn collect(mut stream: ChatStream) -> Result<ChatResponse, Error> {
    let mut response = ChatResponse {
        text: String::new(),
        reasoning: String::new(),
        tool_calls: Vec::new(),
        usage: None,
        finish: FinishReason::Other("none".into()),
    };
    let mut finished = false;
    while let Some(event) = stream.next().await {
        match event? {
            ChatEvent::TextDelta(d) => response.text.push_str(&d),
            ChatEvent::ReasoningDelta(d) => response.reasoning.push_str(&d),
            ChatEvent::ToolCallStart { id, name, .. } => response.tool_calls.push(ToolCall {
                id,
                name,
                arguments: String::new(),
            }),
            ChatEvent::ToolCallArgs { index, delta } => {
                if let Some(call) = response.tool_calls.get_mut(index) {
                    call.arguments.push_str(&delta);
                }
            }
            ChatEvent::Usage(u) => response.usage = Some(u),
            ChatEvent::Finish(reason) => {
                response.finish = reason;
                finished = true;
            }
        }
    }
    if !finished {
        return Err(Error::Truncated);
    }
    Ok(response)
}
