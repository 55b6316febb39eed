//! What an agent declares it can do. Every group and field is optional: omitted
//! means undeclared, not unsupported.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::Metadata;
use crate::decode::{Count, Cx, DResult, Decode, Obj, Path};
use crate::input::Tool;

/// Declares booleans-only capability groups and their decoders.
macro_rules! flag_group {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident : $key:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            $(
                $(#[$fdoc])*
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $field: Option<bool>,
            )*
        }

        impl Decode for $name {
            const EXPECTED: &'static str = "object";

            fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
                let mut o = Obj::new(value, cx, path)?;
                let group = $name { $($field: o.opt(cx, $key)?,)* };
                o.finish(cx)?;
                Ok(group)
            }
        }
    };
}

/// The capability declaration of an agent.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// Who the agent is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityCapabilities>,
    /// Transports it speaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportCapabilities>,
    /// Tool support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolsCapabilities>,
    /// Output formats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputCapabilities>,
    /// State support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<StateCapabilities>,
    /// Multi-agent support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multi_agent: Option<MultiAgentCapabilities>,
    /// Reasoning support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningCapabilities>,
    /// Multimodal input and output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multimodal: Option<MultimodalCapabilities>,
    /// Execution limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionCapabilities>,
    /// Human-in-the-loop support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub human_in_the_loop: Option<HumanInTheLoopCapabilities>,
    /// Open, application-defined capabilities.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom: Option<Map<String, Value>>,
}

/// Who the agent is.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityCapabilities {
    /// Name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Framework or kind.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Documentation URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
    /// Open metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

flag_group!(
    /// Transports.
    TransportCapabilities {
        /// Streams events.
        streaming: "streaming",
        /// WebSocket binding.
        websocket: "websocket",
        /// Protobuf binding.
        http_binary: "httpBinary",
        /// Push notifications.
        push_notifications: "pushNotifications",
        /// Resumable streams.
        resumable: "resumable",
    }
);

/// Tool support.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsCapabilities {
    /// Calls tools at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported: Option<bool>,
    /// Its own tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<Tool>>,
    /// Calls several at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_calls: Option<bool>,
    /// Accepts tools from the client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_provided: Option<bool>,
}

/// Output formats.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputCapabilities {
    /// Structured output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<bool>,
    /// MIME types it produces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported_mime_types: Option<Vec<String>>,
}

flag_group!(
    /// State support.
    StateCapabilities {
        /// Emits snapshots.
        snapshots: "snapshots",
        /// Emits deltas.
        deltas: "deltas",
        /// Has memory.
        memory: "memory",
        /// Persists state.
        persistent_state: "persistentState",
    }
);

/// Multi-agent support.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MultiAgentCapabilities {
    /// Multi-agent at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported: Option<bool>,
    /// Delegates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegation: Option<bool>,
    /// Hands off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoffs: Option<bool>,
    /// Its subagents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagents: Option<Vec<SubagentInfo>>,
}

/// A subagent an agent may start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubagentInfo {
    /// Name.
    pub name: String,
    /// Description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

flag_group!(
    /// Reasoning support.
    ReasoningCapabilities {
        /// Reasons visibly.
        supported: "supported",
        /// Streams reasoning.
        streaming: "streaming",
        /// Emits encrypted reasoning.
        encrypted: "encrypted",
    }
);

/// Multimodal support.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct MultimodalCapabilities {
    /// Input kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<MultimodalInputCapabilities>,
    /// Output kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<MultimodalOutputCapabilities>,
}

flag_group!(
    /// Multimodal input kinds.
    MultimodalInputCapabilities {
        /// Images.
        image: "image",
        /// Audio.
        audio: "audio",
        /// Video.
        video: "video",
        /// PDF documents.
        pdf: "pdf",
        /// Provider files.
        file: "file",
    }
);

flag_group!(
    /// Multimodal output kinds.
    MultimodalOutputCapabilities {
        /// Images.
        image: "image",
        /// Audio.
        audio: "audio",
    }
);

/// Execution limits.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionCapabilities {
    /// Runs code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_execution: Option<bool>,
    /// In a sandbox.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandboxed: Option<bool>,
    /// Iteration cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u64>,
    /// Time cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_execution_time: Option<u64>,
}

flag_group!(
    /// Human-in-the-loop support.
    HumanInTheLoopCapabilities {
        /// At all.
        supported: "supported",
        /// Approvals.
        approvals: "approvals",
        /// Interventions.
        interventions: "interventions",
        /// Feedback.
        feedback: "feedback",
        /// Interrupt outcomes.
        interrupts: "interrupts",
        /// Approve with edited arguments.
        approve_with_edits: "approveWithEdits",
    }
);

impl Decode for AgentCapabilities {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let caps = AgentCapabilities {
            identity: o.opt(cx, "identity")?,
            transport: o.opt(cx, "transport")?,
            tools: o.opt(cx, "tools")?,
            output: o.opt(cx, "output")?,
            state: o.opt(cx, "state")?,
            multi_agent: o.opt(cx, "multiAgent")?,
            reasoning: o.opt(cx, "reasoning")?,
            multimodal: o.opt(cx, "multimodal")?,
            execution: o.opt(cx, "execution")?,
            human_in_the_loop: o.opt(cx, "humanInTheLoop")?,
            custom: o.opt(cx, "custom")?,
        };
        o.finish(cx)?;
        Ok(caps)
    }
}

impl Decode for IdentityCapabilities {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let identity = IdentityCapabilities {
            name: o.opt(cx, "name")?,
            kind: o.opt(cx, "type")?,
            description: o.opt(cx, "description")?,
            version: o.opt(cx, "version")?,
            provider: o.opt(cx, "provider")?,
            documentation_url: o.opt(cx, "documentationUrl")?,
            metadata: o.opt(cx, "metadata")?,
        };
        o.finish(cx)?;
        Ok(identity)
    }
}

impl Decode for ToolsCapabilities {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let tools = ToolsCapabilities {
            supported: o.opt(cx, "supported")?,
            items: o.opt(cx, "items")?,
            parallel_calls: o.opt(cx, "parallelCalls")?,
            client_provided: o.opt(cx, "clientProvided")?,
        };
        o.finish(cx)?;
        Ok(tools)
    }
}

impl Decode for OutputCapabilities {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let output = OutputCapabilities {
            structured_output: o.opt(cx, "structuredOutput")?,
            supported_mime_types: o.opt(cx, "supportedMimeTypes")?,
        };
        o.finish(cx)?;
        Ok(output)
    }
}

impl Decode for MultiAgentCapabilities {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let multi = MultiAgentCapabilities {
            supported: o.opt(cx, "supported")?,
            delegation: o.opt(cx, "delegation")?,
            handoffs: o.opt(cx, "handoffs")?,
            subagents: o.opt(cx, "subagents")?,
        };
        o.finish(cx)?;
        Ok(multi)
    }
}

impl Decode for SubagentInfo {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let info = SubagentInfo {
            name: o.req(cx, "name")?,
            description: o.opt(cx, "description")?,
        };
        o.finish(cx)?;
        Ok(info)
    }
}

impl Decode for MultimodalCapabilities {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let multimodal = MultimodalCapabilities {
            input: o.opt(cx, "input")?,
            output: o.opt(cx, "output")?,
        };
        o.finish(cx)?;
        Ok(multimodal)
    }
}

impl Decode for ExecutionCapabilities {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let exec = ExecutionCapabilities {
            code_execution: o.opt(cx, "codeExecution")?,
            sandboxed: o.opt(cx, "sandboxed")?,
            max_iterations: o.opt::<Count>(cx, "maxIterations")?.map(|c| c.0),
            max_execution_time: o.opt::<Count>(cx, "maxExecutionTime")?.map(|c| c.0),
        };
        o.finish(cx)?;
        Ok(exec)
    }
}
