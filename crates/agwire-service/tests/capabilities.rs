//! `GET /api/v1/agui/capabilities`: the service's agent as AG-UI's
//! `AgentCapabilities` declares it, valid against the official 1.1 schema,
//! saying what the service does (transport, frontend tools, approvals,
//! images) and what its brain's agents do (the pipeline's backend tools and
//! catalogue). (`agwire check --capabilities` judges it too: the binary's
//! `serve` suite.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use agwire_service::brain::llm::LlmBrain;
use agwire_service::{BuiltinAgent, Config};
use serde_json::Value;

use crate::common::{get_json, start, start_brain};

/// The official schema's `AgentCapabilities`, or `None` (announced) without
/// the spec's data.
fn schema() -> Option<jsonschema::Validator> {
    const ID: &str = "https://ag-ui.com/spec/1.1/schema.json";
    let dir = agwire_testkit::peers::spec_dir()?;
    let root = agwire_testkit::peers::read_json(&dir.join("1.1/schema.json"));
    let registry = jsonschema::Registry::new()
        .add(ID, root)
        .expect("schema resource")
        .prepare()
        .expect("schema registry");
    Some(
        jsonschema::options()
            .with_registry(&registry)
            .build(&serde_json::json!({ "$ref": format!("{ID}#AgentCapabilities") }))
            .expect("AgentCapabilities validator"),
    )
}

fn assert_valid(document: &Value) {
    if let Some(schema) = schema() {
        let errors: Vec<String> = schema
            .iter_errors(document)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}\n{document:#}");
    }
    // And as agwire-core reads it, strictly (what `agwire check` does).
    agwire_core::decode::decode::<agwire_core::AgentCapabilities>(
        document.clone(),
        agwire_core::decode::DecodeMode::Strict,
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_declares_what_it_does_for_every_agent() {
    let server = start(
        &Config::default(),
        BuiltinAgent::default(),
        agwire_service::auth::Auth::none(),
    )
    .await;
    let document = get_json(server.addr, "/api/v1/agui/capabilities").await;
    assert_valid(&document);
    assert_eq!(document["identity"]["name"], "agwire");
    assert_eq!(document["identity"]["version"], env!("CARGO_PKG_VERSION"));
    let transport = &document["transport"];
    assert_eq!(transport["streaming"], true);
    assert_eq!(transport["httpBinary"], true);
    assert_eq!(transport["resumable"], true);
    assert_eq!(transport["websocket"], false);
    assert_eq!(document["tools"]["clientProvided"], true);
    assert_eq!(document["humanInTheLoop"]["approvals"], true);
    // A fixed agent declares no backend tools or catalogue of its own.
    assert!(document["tools"].get("items").is_none(), "{document:#}");
    assert!(document.get("custom").is_none(), "{document:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_declares_its_backend_tools_and_its_catalogue() {
    let model = agwire_service::brain::demo::model(Duration::ZERO);
    let server = start_brain(Arc::new(LlmBrain::new(
        Arc::new(model.clone()),
        Arc::new(model),
    )))
    .await;
    let document = get_json(server.addr, "/api/v1/agui/capabilities").await;
    assert_valid(&document);
    // The built-in catalogue's tools, each with its arguments' schema.
    let catalogue = agwire_service::brain::agents::RuntimeConfig::builtin();
    let mut enabled: Vec<&str> = Vec::new();
    for agent in &catalogue.agents {
        for tool in &agent.enabled_tools {
            if !enabled.contains(&tool.as_str()) {
                enabled.push(tool);
            }
        }
    }
    let items = document["tools"]["items"].as_array().expect("tools.items");
    let names: Vec<&str> = items.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, enabled, "{document:#}");
    assert!(items.iter().all(|t| t["parameters"].is_object()));
    let agents: Vec<&str> = document["custom"]["agents"]
        .as_array()
        .expect("custom.agents")
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = catalogue.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(agents, expected);
    assert_eq!(
        document["custom"]["defaultAgent"],
        catalogue.default_agent.as_str()
    );
    assert_eq!(document["execution"]["maxIterations"], 8);
}
