//! The LLM pipeline behind every run: STEP `router` (one structured call
//! picks the agent for the turn from the catalogue), then STEP `worker` (the
//! chosen agent answers with the thread's history, streaming text and
//! reasoning, calling backend tools server-side and handing frontend tools
//! back to the client). The mode (chat or automation) changes only the
//! catalogue the router sees, never the stages.

use std::sync::Arc;

use agwire_core::{Message, RunAgentInput};
use agwire_llm::agui::{self, ToolLoop, Tools};
use agwire_llm::{ChatMessage, ChatModel, ChatRequest, ToolCall, ToolSpec};
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
    /// Routes with `router`, answers with `worker`. Each call is a GenAI
    /// span ([`Traced`](agwire_llm::telemetry::Traced)) naming its stage.
    pub fn new(router: Arc<dyn ChatModel>, worker: Arc<dyn ChatModel>) -> Self {
        use agwire_llm::telemetry::Traced;
        Self {
            router: Arc::new(Traced::new(router).stage("router")),
            worker: Arc::new(Traced::new(worker).stage("worker")),
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
                ctx.add_usage(usage.into());
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
        let mut messages = Vec::with_capacity(history.len() + 2);
        messages.push(ChatMessage::system(self.system_prompt(agent, turn)));
        // The run is given the thread's latest `HISTORY_WINDOW` messages:
        // all of them go to the model (moved: the history is the
        // conversation now).
        messages.extend(agui::chat_messages(history));
        // The request's (frontend) tools; the loop offers the backend ones
        // first. The validator already refused names that collide.
        let request = ChatRequest {
            messages,
            tools: turn.tools.iter().map(ToolSpec::from).collect(),
            ..ChatRequest::default()
        };
        let tools = AgentTools {
            brain: &self.brain,
            agent,
            setup: &self.setup,
            hints: std::sync::Mutex::new(Vec::new()),
        };
        ToolLoop::new(&*self.brain.worker)
            .tools(&tools)
            .max_rounds(MAX_ROUNDS)
            .run(request, ctx)
            .await?;
        let hints = tools
            .hints
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
}

/// The agent's backend tools as the worker's tool loop runs them: a call
/// to a tool the agent does not enable, or to a frontend tool, is handed
/// back; each tool's `ui_hint` is kept for the run's `ui_schema` card.
struct AgentTools<'a> {
    brain: &'a LlmBrain,
    agent: &'a AgentSpec,
    setup: &'a RunSetup,
    hints: std::sync::Mutex<Vec<Value>>,
}

impl Tools for AgentTools<'_> {
    fn specs(&self) -> Vec<ToolSpec> {
        offered(self.brain.tools.specs(&self.agent.enabled_tools))
    }

    fn call<'a>(
        &'a self,
        call: &'a ToolCall,
        _: &'a mut RunContext,
    ) -> Option<agwire_llm::BoxFuture<'a, Result<String, AgentError>>> {
        if !self.brain.tools.has(&call.name) || !self.agent.enabled_tools.contains(&call.name) {
            return None;
        }
        Some(Box::pin(async move {
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
                self.hints
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(hint);
            }
            Ok(output.content)
        }))
    }
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
