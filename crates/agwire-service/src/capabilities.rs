//! The AG-UI capabilities document of the service's agent
//! (`GET /api/v1/agui/capabilities`): what its runs stream and take, as
//! `AgentCapabilities` declares it. AG-UI 1.1 leaves where the document is
//! published to the server (`@ag-ui/client`'s `HttpAgent` reads none), so
//! the service puts it beside its standard endpoint, where
//! `agwire check --capabilities` reads it.
//!
//! Two parts: what the service does for every agent (its transport,
//! frontend tools, approvals, images when attachments are on), declared
//! here; and what the agents can do, declared by the brain
//! ([`crate::brain::Brain::capabilities`]). A group left out is undeclared,
//! not unsupported.

use agwire_core::AgentCapabilities;
use agwire_core::capabilities::{
    HumanInTheLoopCapabilities, IdentityCapabilities, MultimodalCapabilities,
    MultimodalInputCapabilities, ToolsCapabilities, TransportCapabilities,
};

use crate::service::Service;

/// The document, as this service serves its agent now.
pub(crate) fn document(service: &Service) -> AgentCapabilities {
    let engine = &service.engine;
    let mut document = engine.brain.capabilities(&engine.runtime);
    document.identity = Some(IdentityCapabilities {
        name: Some("agwire".to_owned()),
        kind: Some("agwire".to_owned()),
        description: Some(
            "The agwire agent-run service: runs executed in the background, \
             persisted as threads, streamed resumably."
                .to_owned(),
        ),
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        ..IdentityCapabilities::default()
    });
    document.transport = Some(TransportCapabilities {
        // SSE, and protobuf (`application/vnd.ag-ui.event+proto`).
        streaming: Some(true),
        http_binary: Some(true),
        // Every event is numbered and kept: a stream resumes from
        // `Last-Event-ID` on `/api/v1/agent/runs/{runId}/events`.
        resumable: Some(true),
        websocket: Some(false),
        push_notifications: Some(false),
    });
    // Frontend tools in `RunAgentInput.tools` are offered to the agent; a
    // call to one ends the run with the call pending, for the client to
    // answer in the next turn.
    let tools = document
        .tools
        .get_or_insert_with(ToolsCapabilities::default);
    tools.supported = Some(true);
    tools.client_provided = Some(true);
    document.human_in_the_loop = Some(HumanInTheLoopCapabilities {
        supported: Some(true),
        approvals: Some(true),
        ..HumanInTheLoopCapabilities::default()
    });
    document.multimodal = Some(MultimodalCapabilities {
        input: Some(MultimodalInputCapabilities {
            image: Some(service.attachments.is_some()),
            ..MultimodalInputCapabilities::default()
        }),
        output: None,
    });
    document
}
