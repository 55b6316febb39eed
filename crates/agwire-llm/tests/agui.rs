//! The AG-UI bridge without HTTP: a scripted model's replies streamed into
//! a run by `run_detached`, and what the run's events and the model's next
//! request hold.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agwire_core::{Event, RunAgentInput};
use agwire_llm::agui::{LlmAgent, ToolSet};
use agwire_llm::{ChatEvent, ChatMessage, FinishReason, ScriptedModel, ScriptedReply, Usage};
use agwire_server::{CancellationToken, event_queue, run_detached};

/// The run's events, `RUN_STARTED` to the terminal one.
async fn run(agent: &LlmAgent, input: RunAgentInput) -> Vec<Event> {
    let (tx, mut rx) = event_queue(1024);
    let drive = run_detached(agent, input, tx, CancellationToken::new());
    let collect = async {
        let mut events = Vec::new();
        while rx.recv_many(&mut events, 64).await > 0 {}
        events
    };
    let ((), events) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(drive, collect)
    })
    .await
    .expect("the run ends");
    events
}

/// The events' types, a run of the same type written once.
fn types(events: &[Event]) -> Vec<&'static str> {
    let mut types: Vec<&'static str> = events
        .iter()
        .map(|e| e.event_type().map_or("UNKNOWN", |t| t.as_str()))
        .collect();
    types.dedup();
    types
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Add {
    /// First.
    a: i64,
    /// Second.
    b: i64,
}

#[tokio::test]
async fn reasoning_text_tools_and_usage_become_one_verified_run() {
    let mut first = vec![
        ChatEvent::ReasoningDelta("Adding.".into()),
        ChatEvent::TextDelta("Let me add.".into()),
    ];
    // One call with arguments that do not parse, one that does, one for
    // the frontend.
    first.extend(ScriptedReply::calls(&[
        ("c1", "add", r#"{"a": "one"}"#),
        ("c2", "add", r#"{"a": 2, "b": 3}"#),
        ("c3", "show_sum", r#"{"sum": 5}"#),
    ]));
    let mut usage = Usage::new(10, 4);
    usage.reasoning_tokens = Some(2);
    first.push(ChatEvent::Usage(usage));
    first.push(ChatEvent::Finish(FinishReason::ToolCalls));
    let model = ScriptedModel::queue(vec![first]).recording();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let agent = LlmAgent::new(model.clone())
        .instructions("Be exact.")
        .tools(ToolSet::new().typed_tool("add", "Adds.", move |args: Add| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, String>(args.a + args.b) }
        }));
    let mut input = RunAgentInput::new("t1", "r1");
    input.messages = vec![agwire_core::Message::user("u1", "2 + 3?")];
    input.tools = vec![agwire_core::Tool {
        name: "show_sum".into(),
        description: "Shows a sum.".into(),
        parameters: None,
        metadata: None,
    }];
    let events = run(&agent, input).await;
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "RUN_FINISHED",
        ],
        "{events:#?}"
    );
    // The handler ran once: the unparsable call was answered without it.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let results: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallResult(r) => Some(r.content.text()),
            _ => None,
        })
        .collect();
    assert!(results[0].contains("invalid arguments"), "{results:?}");
    assert_eq!(results[1], "5");
    let Some(Event::RunFinished(finished)) = events.last() else {
        panic!("{events:?}")
    };
    let json = serde_json::to_value(finished).unwrap();
    assert_eq!(json["usage"][0]["totalTokens"], 14, "{json}");
    assert_eq!(json["usage"][0]["reasoningTokens"], 2, "{json}");
    // The frontend call is pending; the backend ones are answered.
    let pending = json["outcome"]["pendingToolCallIds"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{json}");
    // The model got the instructions first, the typed tool's schema, then
    // the frontend tool.
    let request = &model.requests()[0];
    assert_eq!(request.messages[0], ChatMessage::system("Be exact."));
    assert_eq!(request.tools[0].name, "add");
    assert_eq!(
        request.tools[0].parameters["properties"]["a"]["description"],
        "First."
    );
    assert_eq!(
        request.tools[0].parameters["required"],
        serde_json::json!(["a", "b"])
    );
    assert!(request.tools[0].parameters.get("$schema").is_none());
    assert_eq!(request.tools[1].name, "show_sum");
}
