//! `system_agents.yaml`: the agents the router chooses between in
//! `runtime_mode: chat`, each with its instructions, backend tools
//! (`enabled_tools`) and context. `runtime_mode: automation` uses an
//! automation job's config instead; both produce the same [`RuntimeConfig`],
//! so the pipeline's stages never change with the mode.
//!
//! The format is documented in `system_agents.example.yaml`.

use serde::Deserialize;

use crate::brain::tools::NAMES;
use crate::error::Error;

/// One agent of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Unique name (what the router answers).
    pub name: String,
    /// What it is for (what the router reads).
    pub description: String,
    /// Its system prompt.
    #[serde(default)]
    pub instructions: String,
    /// Backend tools it may call.
    #[serde(default)]
    pub enabled_tools: Vec<String>,
    /// Extra context given to the model.
    #[serde(default)]
    pub context: Vec<ContextItem>,
}

/// A piece of context (as AG-UI's `Context`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ContextItem {
    /// What it is.
    pub description: String,
    /// The text.
    pub value: String,
}

/// What one run executes with: the router's choices and the default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// The agent used when the router's answer is unusable (and when there
    /// is only one).
    pub default_agent: String,
    /// The catalogue.
    pub agents: Vec<AgentSpec>,
}

impl RuntimeConfig {
    /// Parses and checks `system_agents.yaml` text.
    pub fn parse(yaml: &str) -> Result<Self, Error> {
        let config: Self = serde_saphyr::from_str(yaml)
            .map_err(|e| Error::Config(format!("system agents: {e}")))?;
        config.check()?;
        Ok(config)
    }

    /// Reads a `system_agents.yaml` file.
    pub fn load(path: &std::path::Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        Self::parse(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    /// The catalogue shipped with agwire (a general and a calendar
    /// assistant).
    pub fn builtin() -> Self {
        // Checked by a test; a broken shipped file is a build-time bug.
        Self::parse(include_str!("../../../../system_agents.example.yaml")).unwrap_or_else(|_| {
            Self {
                default_agent: "general".into(),
                agents: vec![AgentSpec {
                    name: "general".into(),
                    description: "General assistant".into(),
                    instructions: String::new(),
                    enabled_tools: Vec::new(),
                    context: Vec::new(),
                }],
            }
        })
    }

    fn check(&self) -> Result<(), Error> {
        if self.agents.is_empty() {
            return Err(Error::Config("system agents: no agents".into()));
        }
        for (i, agent) in self.agents.iter().enumerate() {
            if agent.name.trim().is_empty() {
                return Err(Error::Config(format!(
                    "system agents: agents[{i}] has no name"
                )));
            }
            if self.agents[..i].iter().any(|a| a.name == agent.name) {
                return Err(Error::Config(format!(
                    "system agents: the name '{}' is used twice",
                    agent.name
                )));
            }
            if let Some(tool) = agent
                .enabled_tools
                .iter()
                .find(|t| !NAMES.contains(&t.as_str()))
            {
                return Err(Error::Config(format!(
                    "system agents: agent '{}' enables unknown tool '{tool}' (known: {})",
                    agent.name,
                    NAMES.join(", ")
                )));
            }
        }
        if self.agent(&self.default_agent).is_none() {
            return Err(Error::Config(format!(
                "system agents: default_agent '{}' is not an agent",
                self.default_agent
            )));
        }
        Ok(())
    }

    /// The agent named `name`.
    pub fn agent(&self, name: &str) -> Option<&AgentSpec> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// The default agent.
    pub fn default(&self) -> &AgentSpec {
        self.agent(&self.default_agent).unwrap_or(&self.agents[0])
    }

    /// An automation job's runtime: the job's agent (from this catalogue, or
    /// the default) with the job's tools and context when it sets them.
    pub fn for_job(&self, job: &JobRuntime) -> Result<Self, Error> {
        let base = match &job.agent {
            Some(name) => self
                .agent(name)
                .ok_or_else(|| Error::Config(format!("unknown agent '{name}'")))?,
            None => self.default(),
        };
        let mut agent = base.clone();
        if let Some(tools) = &job.enabled_tools {
            agent.enabled_tools.clone_from(tools);
        }
        if let Some(context) = &job.context {
            agent.context.clone_from(context);
        }
        let config = Self {
            default_agent: agent.name.clone(),
            agents: vec![agent],
        };
        config.check()?;
        Ok(config)
    }
}

/// The runtime part of an automation job's config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct JobRuntime {
    /// Which agent of the catalogue (default: the default agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Its backend tools instead of the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    /// Its context instead of the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<ContextItem>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_parses() {
        let shipped =
            RuntimeConfig::parse(include_str!("../../../../system_agents.example.yaml")).unwrap();
        assert_eq!(shipped, RuntimeConfig::builtin());
        assert!(shipped.agent("general").is_some());
        let calendar = shipped.agent("calendar").unwrap();
        assert!(
            calendar
                .enabled_tools
                .contains(&"calendar_write".to_owned())
        );
    }

    #[test]
    fn mistakes_are_named() {
        let unknown_tool = RuntimeConfig::parse(
            "default_agent: a\nagents:\n  - name: a\n    description: x\n    enabled_tools: [rm_rf]\n",
        )
        .unwrap_err();
        assert!(
            unknown_tool.to_string().contains("unknown tool 'rm_rf'"),
            "{unknown_tool}"
        );
        let no_default =
            RuntimeConfig::parse("default_agent: b\nagents:\n  - name: a\n    description: x\n")
                .unwrap_err();
        assert!(
            no_default.to_string().contains("default_agent 'b'"),
            "{no_default}"
        );
        let twice = RuntimeConfig::parse(
            "default_agent: a\nagents:\n  - {name: a, description: x}\n  - {name: a, description: y}\n",
        )
        .unwrap_err();
        assert!(twice.to_string().contains("used twice"), "{twice}");
        let typo =
            RuntimeConfig::parse("default_agent: a\nagents:\n  - name: a\n    descripton: x\n")
                .unwrap_err();
        assert!(typo.to_string().contains("descripton"), "{typo}");
    }

    #[test]
    fn a_job_narrows_the_catalogue_to_its_agent() {
        let shipped = RuntimeConfig::builtin();
        let job = JobRuntime {
            agent: Some("calendar".into()),
            enabled_tools: Some(vec!["calendar_read".into()]),
            context: None,
        };
        let runtime = shipped.for_job(&job).unwrap();
        assert_eq!(runtime.agents.len(), 1);
        assert_eq!(runtime.default().enabled_tools, ["calendar_read"]);
        assert!(
            shipped
                .for_job(&JobRuntime {
                    agent: Some("nobody".into()),
                    ..JobRuntime::default()
                })
                .is_err()
        );
        assert!(
            shipped
                .for_job(&JobRuntime {
                    enabled_tools: Some(vec!["nope".into()]),
                    ..JobRuntime::default()
                })
                .is_err()
        );
    }
}
