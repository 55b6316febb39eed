//! From a [`ChatModel`] to an AG-UI run (feature `agui`).
//!
//! Three layers; use the highest one that fits:
//!
//! - [`LlmAgent`]: a whole [`Agent`] — a model, instructions and backend
//!   tools ([`ToolSet`]); the request's messages, context and frontend tools
//!   do the rest. Mount it with `AgentEndpoint::new(agent)`.
//! - [`ToolLoop`]: inside your own [`Agent::run`], one call runs the model
//!   until it answers without tools: each model call streamed into the run,
//!   backend tools executed by your [`Tools`], frontend tools handed back
//!   to the client (the run then ends with them pending), usage added to
//!   `RUN_FINISHED`.
//! - [`stream_reply`]: one model call streamed into the run, nothing else.
//!
//! And the conversions between the two vocabularies: an AG-UI
//! [`RunAgentInput`] is a [`ChatRequest`] (`From<&RunAgentInput>`), an AG-UI
//! [`Message`] a [`ChatMessage`] (`TryFrom`; activity and reasoning messages
//! have no chat form), an AG-UI [`Tool`] a [`ToolSpec`] and back, a
//! provider's [`Usage`] an AG-UI [`TokenUsage`].
//!
//! What the run receives from one model call: reasoning deltas as a
//! `REASONING_*` message, text as a `TEXT_MESSAGE_*` message, each tool call
//! as `TOOL_CALL_START`/`ARGS`/`END` (its id minted by the run, its parent
//! the call's text message), usage as the run's token usage. Every event
//! passes the [`RunContext`]'s verification. A cancelled run stops the
//! model call at once (the upstream request is closed); a failed call ends
//! the run with `RUN_ERROR` coded `llm_error` (`model_busy` for a local
//! model's full queue: a limit the client may retry, not a fault).

use std::future::Future;
use std::sync::Arc;

use agwire_core::{Content, ContentPart, Message, PartSource, RunAgentInput, TokenUsage, Tool};
use agwire_server::{Agent, AgentError, RunContext};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::chat::{
    BoxFuture, ChatEvent, ChatMessage, ChatModel, ChatRequest, FinishReason, ToolCall, ToolChoice,
    ToolSpec, Usage, UserPart,
};
use crate::error::Error;

/// Model calls in one [`ToolLoop::run`] unless set: each round of tool
/// calls is one.
pub const DEFAULT_MAX_ROUNDS: usize = 8;

// ---- conversions -------------------------------------------------------

/// An AG-UI message as a model reads it. Activity and reasoning messages
/// have no chat form: the error gives the message back.
///
/// User messages keep their text and images: an image by `http(s):` or
/// `data:` URL, or inline base64 data (sent as a `data:` URL), reaches the
/// model; any other image (a reference only the app can resolve) becomes
/// the text `[image attached]`. Audio, video and documents are left out.
/// Developer messages are system messages.
impl TryFrom<Message> for ChatMessage {
    type Error = Message;

    fn try_from(message: Message) -> Result<Self, Message> {
        Ok(match message {
            Message::User(user) => {
                let content = match user.content {
                    Content::Text(text) => vec![UserPart::Text(text)],
                    Content::Parts(parts) => parts.into_iter().filter_map(user_part).collect(),
                };
                ChatMessage::User { content }
            }
            Message::Assistant(assistant) => ChatMessage::Assistant {
                content: assistant.content,
                reasoning: None,
                tool_calls: assistant
                    .tool_calls
                    .into_iter()
                    .flatten()
                    .map(|call| ToolCall {
                        id: call.id,
                        name: call.function.name,
                        arguments: call.function.arguments,
                    })
                    .collect(),
            },
            Message::Tool(tool) => ChatMessage::Tool {
                content: tool.content.text(),
                tool_call_id: tool.tool_call_id,
            },
            Message::System(system) => ChatMessage::System(system.content),
            Message::Developer(developer) => ChatMessage::System(developer.content),
            other => return Err(other),
        })
    }
}

fn user_part(part: ContentPart) -> Option<UserPart> {
    match part {
        ContentPart::Text(text) => Some(UserPart::Text(text.text)),
        ContentPart::Image(media) => Some(match media.source {
            PartSource::Url { value, .. }
                if value.starts_with("http://")
                    || value.starts_with("https://")
                    || value.starts_with("data:") =>
            {
                UserPart::ImageUrl(value)
            }
            PartSource::Data { value, mime_type } => {
                UserPart::ImageUrl(format!("data:{mime_type};base64,{value}"))
            }
            _ => UserPart::Text("[image attached]".to_owned()),
        }),
        _ => None,
    }
}

/// The messages of `messages` a model can read, in order (see
/// [`ChatMessage`]'s `TryFrom<Message>`).
pub fn chat_messages(messages: impl IntoIterator<Item = Message>) -> Vec<ChatMessage> {
    messages
        .into_iter()
        .filter_map(|m| ChatMessage::try_from(m).ok())
        .collect()
}

/// A frontend tool as offered to the model (no parameters: an object with
/// none).
impl From<Tool> for ToolSpec {
    fn from(tool: Tool) -> Self {
        Self {
            name: tool.name,
            description: tool.description,
            parameters: tool
                .parameters
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        }
    }
}

impl From<&Tool> for ToolSpec {
    fn from(tool: &Tool) -> Self {
        ToolSpec::from(tool.clone())
    }
}

/// A tool as AG-UI announces it (in capabilities, or a client's tool list).
impl From<ToolSpec> for Tool {
    fn from(spec: ToolSpec) -> Self {
        Tool {
            name: spec.name,
            description: spec.description,
            parameters: Some(spec.parameters),
            metadata: None,
        }
    }
}

/// A provider's counts as AG-UI's `RUN_FINISHED` usage.
impl From<Usage> for TokenUsage {
    fn from(usage: Usage) -> Self {
        TokenUsage {
            input_tokens: Some(usage.prompt_tokens),
            output_tokens: Some(usage.completion_tokens),
            total_tokens: Some(usage.total_tokens),
            reasoning_tokens: usage.reasoning_tokens,
            cached_input_tokens: usage.cached_tokens,
            ..TokenUsage::default()
        }
    }
}

/// The model's side of a run's input: its context (one system message,
/// first), its messages, and its frontend tools. Add your instructions
/// first with [`ChatRequest::instructions`].
impl From<&RunAgentInput> for ChatRequest {
    fn from(input: &RunAgentInput) -> Self {
        let mut messages = Vec::with_capacity(input.messages.len() + 1);
        if !input.context.is_empty() {
            let mut text = String::new();
            for context in &input.context {
                if !text.is_empty() {
                    text.push_str("\n\n");
                }
                text.push_str(&format!("{}:\n{}", context.description, context.value));
            }
            messages.push(ChatMessage::System(text));
        }
        messages.extend(chat_messages(input.messages.iter().cloned()));
        let tools: Vec<ToolSpec> = input.tools.iter().map(ToolSpec::from).collect();
        ChatRequest {
            tool_choice: (!tools.is_empty()).then_some(ToolChoice::Auto),
            messages,
            tools,
            ..ChatRequest::default()
        }
    }
}

impl ChatRequest {
    /// Puts `text` first, as the system message the model reads before
    /// anything else.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.messages.insert(0, ChatMessage::System(text.into()));
        self
    }
}

// ---- one call ----------------------------------------------------------

/// What one model call said (its text, reasoning and tool calls were
/// streamed into the run as they came).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Reply {
    /// The answer's text.
    pub text: String,
    /// The reasoning, where the provider sent it.
    pub reasoning: String,
    /// The tool calls, in order, with the ids the run gave them.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts, where the provider sent them (already added to the run).
    pub usage: Option<Usage>,
    /// Why the model stopped (`None`: it did not say).
    pub finish: Option<FinishReason>,
}

impl Reply {
    /// The reply as the conversation's next message.
    pub fn to_message(&self) -> ChatMessage {
        ChatMessage::Assistant {
            content: (!self.text.is_empty()).then(|| self.text.clone()),
            reasoning: None,
            tool_calls: self.tool_calls.clone(),
        }
    }
}

/// The AG-UI error for a failed model call.
pub fn model_failed(error: &Error) -> AgentError {
    match error {
        // A limit, not a fault: the client may retry later.
        Error::Busy { .. } => AgentError::new(error.to_string()).with_code("model_busy"),
        _ => AgentError::new(format!("the model failed: {error}")).with_code("llm_error"),
    }
}

fn cancelled() -> AgentError {
    AgentError::new("cancelled").with_code("cancelled")
}

/// One model call streamed into the run: reasoning, text and tool calls as
/// they arrive (see the [module](self) docs), usage added to the run.
/// Returns what the model said. Cancelling the run closes the call.
pub async fn stream_reply(
    model: &dyn ChatModel,
    request: ChatRequest,
    ctx: &mut RunContext,
) -> Result<Reply, AgentError> {
    let mut stream = tokio::select! {
        stream = model.stream(request) => stream.map_err(|e| model_failed(&e))?,
        () = ctx.cancelled() => return Err(cancelled()),
    };
    let mut reply = Reply::default();
    let mut text_id: Option<String> = None;
    let mut reasoning_id: Option<String> = None;
    // The provider's call index → the run's tool call id, name, arguments.
    let mut calls: Vec<Option<ToolCall>> = Vec::new();
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            // Dropping the stream closes the upstream request.
            () = ctx.cancelled() => return Err(cancelled()),
        };
        let Some(item) = item else {
            break;
        };
        match item.map_err(|e| model_failed(&e))? {
            ChatEvent::ReasoningDelta(delta) => {
                let id = match &reasoning_id {
                    Some(id) => id.clone(),
                    None => {
                        let id = ctx.start_reasoning().await?;
                        reasoning_id = Some(id.clone());
                        id
                    }
                };
                ctx.reasoning(&id, &delta).await?;
                reply.reasoning.push_str(&delta);
            }
            ChatEvent::TextDelta(delta) => {
                if let Some(id) = reasoning_id.take() {
                    ctx.end_reasoning(&id).await?;
                }
                let id = match &text_id {
                    Some(id) => id.clone(),
                    None => {
                        let id = ctx.start_text().await?;
                        text_id = Some(id.clone());
                        id
                    }
                };
                ctx.text(&id, &delta).await?;
                reply.text.push_str(&delta);
            }
            ChatEvent::ToolCallStart { index, name, .. } => {
                if let Some(id) = reasoning_id.take() {
                    ctx.end_reasoning(&id).await?;
                }
                let id = ctx.start_tool_call(&name, text_id.as_deref()).await?;
                if calls.len() <= index {
                    calls.resize(index + 1, None);
                }
                calls[index] = Some(ToolCall {
                    id,
                    name,
                    arguments: String::new(),
                });
            }
            ChatEvent::ToolCallArgs { index, delta } => {
                if let Some(Some(call)) = calls.get_mut(index) {
                    ctx.tool_call_args(&call.id, &delta).await?;
                    call.arguments.push_str(&delta);
                }
            }
            ChatEvent::Usage(usage) => {
                ctx.add_usage(usage.into());
                reply.usage = Some(usage);
            }
            ChatEvent::Finish(reason) => reply.finish = Some(reason),
        }
    }
    if let Some(id) = reasoning_id.take() {
        ctx.end_reasoning(&id).await?;
    }
    if let Some(id) = text_id.take() {
        ctx.end_text(&id).await?;
    }
    for call in calls.into_iter().flatten() {
        ctx.end_tool_call(&call.id).await?;
        reply.tool_calls.push(call);
    }
    Ok(reply)
}

// ---- tools -------------------------------------------------------------

/// Backend tools: the ones the run executes itself.
///
/// [`Tools::call`] decides at once whether a call is its own: `None` hands
/// the call back to the client (a frontend tool, or one this agent may not
/// run), and the run ends with it pending. Its future's `Ok` text is the
/// tool's answer, sent as `TOOL_CALL_RESULT` and given to the model; a
/// tool that fails in a way the model should hear about answers `Ok` with
/// the error in the text; `Err` ends the run.
pub trait Tools: Send + Sync {
    /// The tools offered to the model.
    fn specs(&self) -> Vec<ToolSpec>;

    /// Runs `call`, or `None` if it is not a backend tool. The context is
    /// the run's: a tool may emit (state, activity) before it answers.
    fn call<'a>(
        &'a self,
        call: &'a ToolCall,
        ctx: &'a mut RunContext,
    ) -> Option<BoxFuture<'a, Result<String, AgentError>>>;
}

/// No backend tools: every tool call is handed back.
impl Tools for () {
    fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    fn call<'a>(
        &'a self,
        _: &'a ToolCall,
        _: &'a mut RunContext,
    ) -> Option<BoxFuture<'a, Result<String, AgentError>>> {
        None
    }
}

type Handler = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

/// Backend tools as async functions of their JSON arguments.
///
/// A handler's `Ok` value is the answer (a string as is, anything else as
/// JSON); its `Err` is told to the model as `{"error": "..."}`. Arguments
/// that are not JSON are told to the model the same way, without calling
/// the handler.
///
/// ```
/// use agwire_llm::agui::ToolSet;
/// use serde_json::{Value, json};
///
/// let tools = ToolSet::new().tool(
///     "get_weather",
///     "The weather in a city now.",
///     json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
///     |args: Value| async move {
///         let city = args["city"].as_str().ok_or("no city")?.to_owned();
///         Ok::<_, &str>(json!({"city": city, "celsius": 21}))
///     },
/// );
/// ```
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: Vec<(ToolSpec, Handler)>,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|(spec, _)| &spec.name))
            .finish()
    }
}

impl ToolSet {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool: its name, what it does (the model reads this), the
    /// JSON Schema of its arguments, and the function that runs it.
    pub fn tool<F, Fut, E>(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, E>> + Send + 'static,
        E: std::fmt::Display,
    {
        let spec = ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
        };
        let handler: Handler = Arc::new(move |args| {
            let answer = handler(args);
            Box::pin(async move { answer.await.map_err(|e| e.to_string()) })
        });
        self.tools.push((spec, handler));
        self
    }
}

#[cfg(feature = "schemars")]
impl ToolSet {
    /// Adds a tool whose arguments are the Rust type `A`: the schema the
    /// model is given is `A`'s (derived with `schemars::JsonSchema`; doc
    /// comments become descriptions), and the handler gets `A` parsed.
    /// Arguments that do not parse are told to the model as
    /// `{"error": "..."}` without calling the handler, so it can try again.
    ///
    /// ```
    /// use agwire_llm::agui::ToolSet;
    /// use schemars::JsonSchema;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// struct Weather {
    ///     /// The city, in English.
    ///     city: String,
    /// }
    ///
    /// let tools = ToolSet::new().typed_tool(
    ///     "get_weather",
    ///     "The weather in a city now.",
    ///     |args: Weather| async move { Ok::<_, String>(format!("21 °C in {}", args.city)) },
    /// );
    /// ```
    pub fn typed_tool<A, F, Fut, T, E>(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Self
    where
        A: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: serde::Serialize,
        E: std::fmt::Display,
    {
        let mut parameters = schemars::SchemaGenerator::default()
            .into_root_schema_for::<A>()
            .to_value();
        // What identifies the schema document, not the arguments: providers
        // that check tool schemas strictly refuse keys they do not expect.
        if let Value::Object(object) = &mut parameters {
            object.remove("$schema");
            object.remove("title");
        }
        let handler = Arc::new(handler);
        self.tool(name, description, parameters, move |args: Value| {
            let parsed = serde_json::from_value::<A>(args);
            let handler = handler.clone();
            async move {
                let args = parsed.map_err(|e| format!("invalid arguments: {e}"))?;
                let answer = handler(args).await.map_err(|e| e.to_string())?;
                serde_json::to_value(answer).map_err(|e| e.to_string())
            }
        })
    }
}

impl Tools for ToolSet {
    fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|(spec, _)| spec.clone()).collect()
    }

    fn call<'a>(
        &'a self,
        call: &'a ToolCall,
        _: &'a mut RunContext,
    ) -> Option<BoxFuture<'a, Result<String, AgentError>>> {
        let (_, handler) = self.tools.iter().find(|(spec, _)| spec.name == call.name)?;
        let arguments = if call.arguments.trim().is_empty() {
            Ok(json!({}))
        } else {
            serde_json::from_str::<Value>(&call.arguments)
        };
        let answer = arguments.map(|args| handler(args));
        Some(Box::pin(async move {
            let answer = match answer {
                Ok(answer) => answer.await,
                Err(error) => Err(format!("the arguments are not JSON: {error}")),
            };
            Ok(match answer {
                Ok(Value::String(text)) => text,
                Ok(value) => value.to_string(),
                Err(error) => json!({ "error": error }).to_string(),
            })
        }))
    }
}

// ---- the loop ----------------------------------------------------------

/// How a [`ToolLoop`] ended.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct LoopEnd {
    /// The conversation as it stands: the request's messages, then each
    /// reply and each backend tool's answer.
    pub messages: Vec<ChatMessage>,
    /// The last model call's reply.
    pub last: Reply,
    /// Tool calls handed back to the client (the run ends with them pending).
    pub handed_back: Vec<ToolCall>,
    /// Model calls made.
    pub rounds: usize,
}

/// Runs a model with tools until it answers without calling one, a tool is
/// handed back to the client, or the rounds run out.
///
/// ```no_run
/// use agwire_llm::agui::{ToolLoop, ToolSet};
/// use agwire_llm::{ChatModel, ChatRequest};
/// use agwire_server::{Agent, AgentError, RunContext, core::RunAgentInput};
///
/// struct Helper {
///     model: Box<dyn ChatModel>,
///     tools: ToolSet,
/// }
///
/// impl Agent for Helper {
///     async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
///         let request = ChatRequest::from(&input).instructions("You are terse.");
///         ToolLoop::new(&*self.model).tools(&self.tools).run(request, ctx).await?;
///         Ok(())
///     }
/// }
/// ```
#[derive(Debug)]
pub struct ToolLoop<'a> {
    model: &'a dyn ChatModel,
    tools: &'a dyn Tools,
    max_rounds: usize,
}

impl std::fmt::Debug for dyn Tools + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.specs().iter().map(|s| &s.name))
            .finish()
    }
}

impl<'a> ToolLoop<'a> {
    /// `model` with no backend tools and [`DEFAULT_MAX_ROUNDS`].
    pub fn new(model: &'a dyn ChatModel) -> Self {
        Self {
            model,
            tools: &(),
            max_rounds: DEFAULT_MAX_ROUNDS,
        }
    }

    /// The backend tools (offered to the model before the request's own,
    /// the frontend's).
    pub fn tools(mut self, tools: &'a dyn Tools) -> Self {
        self.tools = tools;
        self
    }

    /// Most model calls (at least 1).
    pub fn max_rounds(mut self, rounds: usize) -> Self {
        self.max_rounds = rounds.max(1);
        self
    }

    /// Runs the loop. The model is offered the backend tools first, then
    /// the request's own tools (the frontend's); each reply joins the
    /// conversation, each backend call is answered in the run
    /// (`TOOL_CALL_RESULT`) and in the conversation, and a call that is not
    /// a backend tool's ends the loop after its round, pending.
    pub async fn run(
        self,
        mut request: ChatRequest,
        ctx: &mut RunContext,
    ) -> Result<LoopEnd, AgentError> {
        let backend = self.tools.specs();
        if !backend.is_empty() {
            let frontend = std::mem::take(&mut request.tools);
            request.tools = backend;
            request.tools.extend(frontend);
        }
        if !request.tools.is_empty() && request.tool_choice.is_none() {
            request.tool_choice = Some(ToolChoice::Auto);
        }
        let mut end = LoopEnd::default();
        while end.rounds < self.max_rounds {
            end.rounds += 1;
            let reply = stream_reply(self.model, request.clone(), ctx).await?;
            let message = reply.to_message();
            request.messages.push(message);
            let calls = reply.tool_calls.clone();
            end.last = reply;
            if calls.is_empty() {
                break;
            }
            for call in calls {
                let span = crate::telemetry::tool_span(&call);
                let Some(answer) = span.in_scope(|| self.tools.call(&call, ctx)) else {
                    end.handed_back.push(call);
                    continue;
                };
                let answered = answer.instrument(span.clone()).await;
                crate::telemetry::tool_ended(
                    &span,
                    answered.as_ref().map_err(|e| e.message.as_str()),
                );
                drop(span);
                let content = answered?;
                ctx.tool_result(&call.id, content.clone()).await?;
                request.messages.push(ChatMessage::Tool {
                    tool_call_id: call.id.clone(),
                    content,
                });
            }
            if !end.handed_back.is_empty() {
                break;
            }
        }
        end.messages = request.messages;
        Ok(end)
    }
}

// ---- a whole agent -----------------------------------------------------

/// An AG-UI agent answered by a chat model: your instructions and backend
/// tools; the request's context, messages and frontend tools.
///
/// ```no_run
/// use agwire_llm::agui::{LlmAgent, ToolSet};
/// use agwire_llm::{OpenAiCompatible, OpenAiConfig};
/// use agwire_server::AgentEndpoint;
///
/// # fn app() -> Result<axum::Router, agwire_llm::Error> {
/// let key = std::env::var("OPENAI_API_KEY").unwrap_or_default();
/// let model = OpenAiCompatible::new(
///     OpenAiConfig::new("https://api.openai.com/v1", "gpt-4o-mini").api_key(key),
/// )?;
/// let agent = LlmAgent::new(model).instructions("You are a helpful assistant.");
/// Ok(axum::Router::new().route_service("/agent", AgentEndpoint::new(agent)))
/// # }
/// ```
#[derive(Debug)]
pub struct LlmAgent {
    model: Arc<dyn ChatModel>,
    instructions: Option<String>,
    tools: ToolSet,
    max_rounds: usize,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
}

impl LlmAgent {
    /// An agent answered by `model`, with no instructions and no tools.
    pub fn new(model: impl ChatModel + 'static) -> Self {
        Self::shared(Arc::new(model))
    }

    /// [`LlmAgent::new`] for a model shared with others.
    pub fn shared(model: Arc<dyn ChatModel>) -> Self {
        Self {
            model,
            instructions: None,
            tools: ToolSet::new(),
            max_rounds: DEFAULT_MAX_ROUNDS,
            temperature: None,
            max_tokens: None,
        }
    }

    /// The system prompt, before the request's context.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// The backend tools.
    pub fn tools(mut self, tools: ToolSet) -> Self {
        self.tools = tools;
        self
    }

    /// Most model calls per run (see [`ToolLoop::max_rounds`]).
    pub fn max_rounds(mut self, rounds: usize) -> Self {
        self.max_rounds = rounds.max(1);
        self
    }

    /// Sampling temperature of every call.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Output limit of every call, in tokens.
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = Some(tokens);
        self
    }
}

impl Agent for LlmAgent {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let mut request = ChatRequest::from(&input);
        drop(input);
        if let Some(instructions) = &self.instructions {
            request = request.instructions(instructions.clone());
        }
        request.temperature = self.temperature;
        request.max_tokens = self.max_tokens;
        ToolLoop::new(&*self.model)
            .tools(&self.tools)
            .max_rounds(self.max_rounds)
            .run(request, ctx)
            .await?;
        Ok(())
    }
}
