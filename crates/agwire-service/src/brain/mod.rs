//! What executes a run: a [`Brain`] builds the agent for each run from what
//! the service knows about it ([`RunSetup`]: who asks, in which time zone,
//! with which catalogue, after which conversation). The LLM pipeline is one
//! brain; a fixed agent (the built-in one, a test's) is another.

pub mod agents;
pub mod builtin;
pub mod demo;
pub mod llm;
mod setup;
pub(crate) mod tools;
pub mod ui_schema;

use std::sync::Arc;

use agwire_core::{AgentCapabilities, Message};
use agwire_server::DynAgent;

use crate::brain::agents::RuntimeConfig;
use crate::clock::RunClock;
use crate::run::RuntimeMode;
use crate::store::Store;

/// Everything a run's agent may need beyond its `RunAgentInput`.
#[derive(Debug, Clone)]
pub struct RunSetup {
    /// The user the run belongs to.
    pub user: String,
    /// `forwardedProps.runtime_mode` (`None` on `/api/v1/agui`, which is chat).
    pub mode: Option<RuntimeMode>,
    /// Time zone and "now".
    pub clock: RunClock,
    /// The user's locale (`settings.locale`, else `en`).
    pub locale: String,
    /// The thread's latest [`crate::store::HISTORY_WINDOW`] messages, this
    /// turn's new ones included, in order (tool messages too).
    pub history: Vec<Message>,
    /// The agents this run may route to (chat: `system_agents.yaml`,
    /// shared by every run; automation: the job's).
    pub runtime: Arc<RuntimeConfig>,
    /// The store (tools keep their data there).
    pub store: std::sync::Arc<dyn Store>,
}

/// Builds the agent one run executes.
pub trait Brain: Send + Sync + std::fmt::Debug {
    /// The agent for this run.
    fn agent(&self, setup: RunSetup) -> Arc<dyn DynAgent>;
    /// What `/healthz` says about it (`"builtin"`, `"scripted"`,
    /// `"openai:gpt-4o-mini"`).
    fn describe(&self) -> String;
    /// What an operator should know about it (`/healthz`), if anything.
    fn note(&self) -> Option<String> {
        None
    }
    /// What the agents it builds can do, as AG-UI's capabilities document
    /// declares it, given the chat catalogue (the service adds what it does
    /// for every agent: `crate::capabilities`). By default nothing: a fixed
    /// agent declares no tools or agents of its own.
    fn capabilities(&self, _catalogue: &RuntimeConfig) -> AgentCapabilities {
        AgentCapabilities::default()
    }
}

/// The same agent for every run, whatever its setup.
#[derive(Clone)]
pub struct Fixed {
    agent: Arc<dyn DynAgent>,
    name: String,
}

impl std::fmt::Debug for Fixed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fixed").field("name", &self.name).finish()
    }
}

impl Fixed {
    /// Runs `agent`, described as `name`.
    pub fn new(agent: Arc<dyn DynAgent>, name: impl Into<String>) -> Self {
        Self {
            agent,
            name: name.into(),
        }
    }
}

impl Brain for Fixed {
    fn agent(&self, _setup: RunSetup) -> Arc<dyn DynAgent> {
        self.agent.clone()
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}
