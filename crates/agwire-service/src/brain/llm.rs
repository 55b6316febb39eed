//! The LLM pipeline behind every run: STEP `router` (one structured call
//! picks the agent for the turn from the catalogue), then STEP `worker` (the
//! chosen agent answers with the thread's history, streaming text and
//! reasoning, calling backend tools server-side and handing frontend tools
//! back to the client). The mode (chat or automation) changes only the
//! catalogue the router sees, never the stages.

use std::sync::Arc;

use agwire_core::{Content, ContentPart, Message, PartSource, RunAgentInput, TokenUsage};
use agwire_llm::{
    ChatEvent, ChatMessage, ChatModel, ChatRequest, ToolCall, ToolChoice, ToolSpec, UserPart,
};
use agwire_server::{Agent, AgentError, DynAgent, RunContext};
use serde_json::{Value, json};

use crate::brain::agents::{AgentSpec, RuntimeConfig};
use crate::brain::tools::{BackendTools, ToolEnv};
use crate::brain::{Brain, RunSetup};

/// What `/healthz` and the start-up log say when runs are answered by the
/// scripted model.
pub const SCRIPTED_NOTE: &str = "runs are answered by a deterministic scripted model, not a language model: run with --model PATH.gguf (or hf:OWNER/REPO/FILE.gguf) for a local model, or set AGWIRE_LLM_BASE_URL for a provider";

/// Most model calls in one worker step (each tool round is one).
pub const MAX_ROUNDS: usize = 8;

/// The LLM brain: a router model and a worker model (they may be the same),
/// and the backend tools.
#[derive(Clone)]
pub struct LlmBrain {
    router: Arc<dyn ChatModel>,
    worker: Arc<dyn ChatModel>,
    tools: Arc<BackendTools>,
}

impl std::fmt::Debug for LlmBrain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmBrain")
            .field("router", &self.router.name())
            .field("worker", &self.worker.name())
            .finish()
    }
}

impl LlmBrain {
    /// Routes with `router`, answers with `worker`.
    pub fn new(router: Arc<dyn ChatModel>, worker: Arc<dyn ChatModel>) -> Self {
        Self {
            router,
            worker,
            tools: Arc::new(BackendTools::new()),
        }
    }
}

impl Brain for LlmBrain {
    fn agent(&self, mut setup: RunSetup) -> Arc<dyn DynAgent> {
        Arc::new(LlmRun {
            brain: self.clone(),
            history: std::sync::Mutex::new(std::mem::take(&mut setup.history)),
            setup,
        })
    }

    fn note(&self) -> Option<String> {
        (self.worker.name() == "scripted").then(|| SCRIPTED_NOTE.to_owned())
    }

    /// The catalogue's backend tools (each once, with its arguments'
    /// schema), its agents (the router picks one per run: said in
    /// `custom`, not as AG-UI subagents, which would promise `SUBAGENT_*`
    /// events) and the worker's rounds.
    fn capabilities(&self, catalogue: &RuntimeConfig) -> agwire_core::AgentCapabilities {
        use agwire_core::capabilities::{ExecutionCapabilities, ToolsCapabilities};
        let mut enabled: Vec<String> = Vec::new();
        for tool in catalogue.agents.iter().flat_map(|a| &a.enabled_tools) {
            if !enabled.contains(tool) {
                enabled.push(tool.clone());
            }
        }
        let items = self
            .tools
            .specs(&enabled)
            .into_iter()
            .map(|spec| agwire_core::Tool {
                name: spec.name.to_owned(),
                description: spec.description.to_owned(),
                parameters: Some(spec.parameters.clone()),
                metadata: None,
            })
            .collect();
        let agents: Vec<Value> = catalogue
            .agents
            .iter()
            .map(|a| json!({"name": a.name, "description": a.description}))
            .collect();
        let mut custom = serde_json::Map::new();
        custom.insert("agents".to_owned(), Value::Array(agents));
        custom.insert("defaultAgent".to_owned(), json!(catalogue.default_agent));
        agwire_core::AgentCapabilities {
            tools: Some(ToolsCapabilities {
                supported: Some(true),
                items: Some(items),
                ..ToolsCapabilities::default()
            }),
            execution: Some(ExecutionCapabilities {
                max_iterations: Some(MAX_ROUNDS as u64),
                ..ExecutionCapabilities::default()
            }),
            custom: Some(custom),
            ..agwire_core::AgentCapabilities::default()
        }
    }

    fn describe(&self) -> String {
        if self.router.name() == self.worker.name() {
            self.worker.name().to_owned()
        } else {
            format!(
                "router {}, worker {}",
                self.router.name(),
                self.worker.name()
            )
        }
    }
}

/// One run of the pipeline.
#[derive(Debug)]
struct LlmRun {
    brain: LlmBrain,
    /// The setup's history, taken by the run when it starts: it becomes the
    /// model's conversation, and is not held twice while the run streams.
    history: std::sync::Mutex<Vec<Message>>,
    setup: RunSetup,
}

/// What the worker uses of the run's input (its messages are in the
/// history already): the rest of the input is not held while the run
/// streams.
struct Turn {
    context: Vec<agwire_core::Context>,
    tools: Vec<agwire_core::Tool>,
}

fn failed(error: &agwire_llm::Error) -> AgentError {
    match error {
        // A limit, not a fault: the client may retry later.
        agwire_llm::Error::Busy { .. } => {
            AgentError::new(error.to_string()).with_code("model_busy")
        }
        _ => AgentError::new(format!("the model failed: {error}")).with_code("llm_error"),
    }
}

impl Agent for LlmRun {
    // Not an `async fn`: its input would be held in the future for the
    // whole run; only the turn's context and tools are.
    fn run(
        &self,
        input: RunAgentInput,
        ctx: &mut RunContext,
    ) -> impl Future<Output = Result<(), AgentError>> + Send {
        let turn = Turn {
            context: input.context,
            tools: input.tools,
        };
        let history = std::mem::take(
            &mut *self
                .history
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        async move {
            ctx.start_step("router").await?;
            let (agent, usage) = Box::pin(self.route(&history)).await;
            if let Some(usage) = usage {
                ctx.add_usage(token_usage(usage));
            }
            ctx.finish_step("router").await?;
            ctx.start_step("worker").await?;
            self.work(agent, &turn, history, ctx).await?;
            ctx.finish_step("worker").await?;
            Ok(())
        }
    }
}

/// The router's call: the catalogue, the user's latest words, and an answer
/// held to `{"agent": <a catalogue name>}`.
pub fn route_request(catalogue: &RuntimeConfig, user_text: &str) -> ChatRequest {
    let mut listing = String::new();
    for agent in &catalogue.agents {
        listing.push_str(&format!("- {}: {}\n", agent.name, agent.description.trim()));
    }
    ChatRequest {
        messages: vec![
            ChatMessage::system(format!(
                "You route a user's message to the agent best suited to answer it.\nAgents:\n{listing}\nAnswer with JSON only: {{\"agent\": \"<name>\"}}."
            )),
            ChatMessage::user(user_text),
        ],
        json_mode: true,
        // A model that decodes under a schema (the local one) can only
        // name a catalogue agent.
        response_schema: Some(route_schema(
            catalogue.agents.iter().map(|a| a.name.as_str()),
        )),
        temperature: Some(0.0),
        max_tokens: Some(50),
        ..ChatRequest::default()
    }
}

/// The agent a router's answer names, if it is in the catalogue.
pub fn routed<'a>(catalogue: &'a RuntimeConfig, answer: &str) -> Option<&'a AgentSpec> {
    parse_route(answer).and_then(|name| catalogue.agent(&name))
}

/// The backend tools named in `enabled`, as offered to the model.
pub fn backend_tool_specs(enabled: &[String]) -> Vec<ToolSpec> {
    offered(BackendTools::new().specs(enabled))
}

fn offered(specs: Vec<&crate::brain::tools::ToolSpec>) -> Vec<ToolSpec> {
    specs
        .into_iter()
        .map(|s| ToolSpec {
            name: s.name.to_owned(),
            description: s.description.to_owned(),
            parameters: s.parameters.clone(),
        })
        .collect()
}

/// The router's answer: `{"agent": one of the catalogue's names}`, nothing else.
pub fn route_schema<'a>(names: impl Iterator<Item = &'a str>) -> Value {
    json!({
        "type": "object",
        "properties": {"agent": {"enum": names.collect::<Vec<_>>()}},
        "required": ["agent"],
        "additionalProperties": false,
    })
}

/// The latest user message's text (what the router judges).
fn last_user_text(history: &[Message]) -> String {
    history
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User(u) => Some(u.content.text()),
            _ => None,
        })
        .unwrap_or_default()
}

impl LlmRun {
    /// Picks the agent. One agent: no call. An unusable answer (or a failed
    /// call): the default agent, with a warning — never a failed run.
    async fn route(&self, history: &[Message]) -> (&AgentSpec, Option<agwire_llm::Usage>) {
        let catalogue = &self.setup.runtime;
        if catalogue.agents.len() == 1 {
            return (catalogue.default(), None);
        }
        let request = route_request(catalogue, &last_user_text(history));
        let answer = match self.brain.router.stream(request).await {
            Ok(stream) => agwire_llm::collect(stream).await,
            Err(error) => Err(error),
        };
        let usage = answer.as_ref().ok().and_then(|a| a.usage);
        let chosen = match &answer {
            Ok(response) => routed(catalogue, &response.text),
            Err(_) => None,
        };
        let agent = match chosen {
            Some(agent) => agent,
            None => {
                tracing::warn!(answer = ?answer.map(|a| a.text), default = catalogue.default_agent, "router answer unusable; using the default agent");
                catalogue.default()
            }
        };
        (agent, usage)
    }

    /// The system prompt: the agent's instructions, the user's time, the
    /// context.
    fn system_prompt(&self, agent: &AgentSpec, turn: &Turn) -> String {
        let mut prompt = agent.instructions.trim().to_owned();
        prompt.push_str("\n\n");
        prompt.push_str(&self.setup.clock.describe());
        prompt.push_str(&format!(
            "\nThe user's time zone is {} (from {}); the server's own time zone is irrelevant.",
            self.setup.clock.zone_name,
            match self.setup.clock.source {
                crate::clock::ZoneSource::Device => "their device",
                crate::clock::ZoneSource::Profile => "their profile",
                crate::clock::ZoneSource::Utc => "no setting: UTC",
            }
        ));
        prompt.push_str(&format!("\nThe user's locale is {}.", self.setup.locale));
        let context = agent
            .context
            .iter()
            .map(|c| (c.description.as_str(), c.value.as_str()))
            .chain(
                turn.context
                    .iter()
                    .map(|c| (c.description.as_str(), c.value.as_str())),
            );
        for (description, value) in context {
            prompt.push_str(&format!("\n\n{description}:\n{value}"));
        }
        prompt
    }

    async fn work(
        &self,
        agent: &AgentSpec,
        turn: &Turn,
        history: Vec<Message>,
        ctx: &mut RunContext,
    ) -> Result<(), AgentError> {
        let mut conversation = Vec::with_capacity(history.len() + 2);
        conversation.push(ChatMessage::system(self.system_prompt(agent, turn)));
        // The run is given the thread's latest `HISTORY_WINDOW` messages:
        // all of them go to the model (moved: the history is the
        // conversation now).
        conversation.extend(history.into_iter().filter_map(into_chat));
        let mut tools = offered(self.brain.tools.specs(&agent.enabled_tools));
        // Frontend tools (the request's) after ours; the validator already
        // refused names that collide.
        tools.extend(turn.tools.iter().map(|t| {
            ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t
                    .parameters
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            }
        }));
        let mut hints: Vec<Value> = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let request = ChatRequest {
                messages: conversation.clone(),
                tools: tools.clone(),
                tool_choice: (!tools.is_empty()).then_some(ToolChoice::Auto),
                ..ChatRequest::default()
            };
            let round = self.stream_round(request, ctx).await?;
            conversation.push(ChatMessage::Assistant {
                content: (!round.text.is_empty()).then(|| round.text.clone()),
                reasoning: None,
                tool_calls: round.calls.clone(),
            });
            if round.calls.is_empty() {
                break;
            }
            let mut handed_back = false;
            for call in &round.calls {
                if !self.brain.tools.has(&call.name) || !agent.enabled_tools.contains(&call.name) {
                    // A frontend tool: the client runs it; the run ends
                    // with it pending.
                    handed_back = true;
                    continue;
                }
                let env = ToolEnv {
                    store: &*self.setup.store,
                    user: &self.setup.user,
                    clock: &self.setup.clock,
                    now_ms: jiff::Timestamp::now().as_millisecond(),
                };
                let output = self
                    .brain
                    .tools
                    .call(&call.name, &call.arguments, env)
                    .await;
                if let Some(hint) = output.ui_hint {
                    hints.push(hint);
                }
                ctx.tool_result(&call.id, output.content.clone()).await?;
                conversation.push(ChatMessage::Tool {
                    tool_call_id: call.id.clone(),
                    content: output.content,
                });
            }
            if handed_back {
                break;
            }
        }
        if !hints.is_empty() {
            let compiled = crate::brain::ui_schema::compile(&hints, &self.setup.locale);
            for warning in &compiled.warnings {
                tracing::warn!(%warning, "ui_hints");
            }
            if let Some(Value::Object(schema)) = compiled.schema {
                let id = ctx.new_id("ui");
                ctx.activity_snapshot(&id, "ui_schema", schema).await?;
            }
        }
        Ok(())
    }

    /// One model call streamed into the run: text, reasoning and tool calls
    /// as they arrive. Returns what the model said.
    async fn stream_round(
        &self,
        request: ChatRequest,
        ctx: &mut RunContext,
    ) -> Result<Round, AgentError> {
        let mut stream = tokio::select! {
            stream = self.brain.worker.stream(request) => stream.map_err(|e| failed(&e))?,
            () = ctx.cancelled() => return Err(AgentError::new("cancelled").with_code("cancelled")),
        };
        let mut round = Round::default();
        let mut text_id: Option<String> = None;
        let mut reasoning_id: Option<String> = None;
        // Provider index → our tool call id.
        let mut calls: Vec<(String, String, String)> = Vec::new();
        loop {
            let item = tokio::select! {
                item = futures_util::StreamExt::next(&mut stream) => item,
                // Dropping the stream closes the upstream request.
                () = ctx.cancelled() => return Err(AgentError::new("cancelled").with_code("cancelled")),
            };
            let Some(item) = item else {
                break;
            };
            match item.map_err(|e| failed(&e))? {
                ChatEvent::ReasoningDelta(delta) => {
                    if reasoning_id.is_none() {
                        reasoning_id = Some(ctx.start_reasoning().await?);
                    }
                    if let Some(id) = &reasoning_id {
                        ctx.reasoning(id, &delta).await?;
                    }
                }
                ChatEvent::TextDelta(delta) => {
                    if let Some(id) = reasoning_id.take() {
                        ctx.end_reasoning(&id).await?;
                    }
                    if text_id.is_none() {
                        text_id = Some(ctx.start_text().await?);
                    }
                    if let Some(id) = &text_id {
                        ctx.text(id, &delta).await?;
                    }
                    round.text.push_str(&delta);
                }
                ChatEvent::ToolCallStart { index, name, .. } => {
                    if let Some(id) = reasoning_id.take() {
                        ctx.end_reasoning(&id).await?;
                    }
                    let id = ctx.start_tool_call(&name, text_id.as_deref()).await?;
                    if calls.len() <= index {
                        calls.resize(index + 1, (String::new(), String::new(), String::new()));
                    }
                    calls[index] = (id, name, String::new());
                }
                ChatEvent::ToolCallArgs { index, delta } => {
                    if let Some((id, _, args)) = calls.get_mut(index)
                        && !id.is_empty()
                    {
                        ctx.tool_call_args(id, &delta).await?;
                        args.push_str(&delta);
                    }
                }
                ChatEvent::Usage(usage) => ctx.add_usage(token_usage(usage)),
                ChatEvent::Finish(_) => {}
            }
        }
        if let Some(id) = reasoning_id.take() {
            ctx.end_reasoning(&id).await?;
        }
        if let Some(id) = text_id.take() {
            ctx.end_text(&id).await?;
        }
        for (id, name, arguments) in calls {
            if id.is_empty() {
                continue;
            }
            ctx.end_tool_call(&id).await?;
            round.calls.push(ToolCall {
                id,
                name,
                arguments,
            });
        }
        Ok(round)
    }
}

/// A provider's counts as AG-UI's.
fn token_usage(usage: agwire_llm::Usage) -> TokenUsage {
    TokenUsage {
        input_tokens: Some(usage.prompt_tokens),
        output_tokens: Some(usage.completion_tokens),
        total_tokens: Some(usage.total_tokens),
        ..TokenUsage::default()
    }
}

/// What one model call said.
#[derive(Debug, Default)]
struct Round {
    text: String,
    calls: Vec<ToolCall>,
}

/// The router's answer: `{"agent": "name"}`, tolerating code fences and a
/// bare name.
fn parse_route(text: &str) -> Option<String> {
    let trimmed = text
        .trim()
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(trimmed) {
        return object
            .get("agent")
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    let bare = trimmed.trim_matches('"');
    (!bare.is_empty()
        && bare
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-'))
    .then(|| bare.to_owned())
}

/// A stored AG-UI message as the model sees it (its text moved, not copied).
fn into_chat(message: Message) -> Option<ChatMessage> {
    match message {
        Message::User(user) => {
            let parts = match user.content {
                Content::Text(text) => vec![UserPart::Text(text)],
                Content::Parts(parts) => parts
                    .into_iter()
                    .filter_map(|part| match part {
                        ContentPart::Text(t) => Some(UserPart::Text(t.text)),
                        ContentPart::Image(media) => match media.source {
                            // Stored attachments are references; the model
                            // gets a note, not our internal id.
                            PartSource::Url { value, .. }
                                if value.starts_with("http") || value.starts_with("data:") =>
                            {
                                Some(UserPart::ImageUrl(value))
                            }
                            _ => Some(UserPart::Text("[image attached]".into())),
                        },
                        _ => None,
                    })
                    .collect(),
            };
            Some(ChatMessage::User { content: parts })
        }
        Message::Assistant(assistant) => Some(ChatMessage::Assistant {
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
        }),
        Message::Tool(tool) => Some(ChatMessage::Tool {
            content: tool.content.text(),
            tool_call_id: tool.tool_call_id,
        }),
        Message::System(system) => Some(ChatMessage::system(system.content)),
        Message::Developer(developer) => Some(ChatMessage::system(developer.content)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_answers_are_read_leniently() {
        assert_eq!(
            parse_route(r#"{"agent": "calendar"}"#).as_deref(),
            Some("calendar")
        );
        assert_eq!(
            parse_route("```json\n{\"agent\":\"general\"}\n```").as_deref(),
            Some("general")
        );
        assert_eq!(parse_route("calendar").as_deref(), Some("calendar"));
        assert_eq!(parse_route("I think the calendar one"), None);
        assert_eq!(parse_route(r#"{"pick": "x"}"#), None);
    }
}
