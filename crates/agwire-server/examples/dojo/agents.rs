//! The AG-UI dojo features as deterministic agents: the same input always
//! gives the same stream, so tests can state exactly what a client must fold.
//!
//! Served by agwire-server's `dojo` example (this file is its `agents`
//! module) and exercised by the workspace's tests through the test kit's
//! `dojo` module, which is this same file: what the tests prove is what the
//! example serves.
// Public for the test kit, which exports these agents; the example uses
// them from a private module.
#![allow(unreachable_pub)]

use agwire_server::core::{Interrupt, Message, ResumeStatus, RunAgentInput};
use agwire_server::{Agent, AgentEndpoint, AgentError, RunContext};
use serde_json::{Value, json};

/// Every feature, mounted at its dojo path (`/agentic_chat`,
/// `/backend_tool_rendering`, `/human_in_the_loop`, `/agentic_generative_ui`,
/// `/tool_based_generative_ui`, `/shared_state`, `/predictive_state_updates`,
/// `/reasoning`, `/subagents`, `/interrupt`), each endpoint passed through
/// `configure` first (a negotiator, say).
pub fn router(configure: impl Fn(AgentEndpoint) -> AgentEndpoint) -> axum::Router {
    let mut router = axum::Router::new();
    let routes: Vec<(&str, AgentEndpoint)> = vec![
        ("/agentic_chat", AgentEndpoint::new(AgenticChat)),
        (
            "/backend_tool_rendering",
            AgentEndpoint::new(BackendToolRendering),
        ),
        ("/human_in_the_loop", AgentEndpoint::new(HumanInTheLoop)),
        (
            "/agentic_generative_ui",
            AgentEndpoint::new(AgenticGenerativeUi),
        ),
        (
            "/tool_based_generative_ui",
            AgentEndpoint::new(ToolBasedGenerativeUi),
        ),
        ("/shared_state", AgentEndpoint::new(SharedState)),
        (
            "/predictive_state_updates",
            AgentEndpoint::new(PredictiveStateUpdates),
        ),
        ("/reasoning", AgentEndpoint::new(Reasoning)),
        ("/subagents", AgentEndpoint::new(Subagents)),
        ("/interrupt", AgentEndpoint::new(InterruptAgent)),
    ];
    for (path, endpoint) in routes {
        router = router.route_service(path, configure(endpoint));
    }
    router
}

/// The text of the last user message, if the conversation ends with one.
fn last_user_text(input: &RunAgentInput) -> Option<String> {
    match input.messages.last()? {
        Message::User(m) => Some(m.content.text()),
        _ => None,
    }
}

/// The tool message the conversation ends with: the frontend answering the
/// previous run's tool call.
fn tool_answer(input: &RunAgentInput) -> Option<String> {
    match input.messages.last()? {
        Message::Tool(m) => Some(m.content.text()),
        _ => None,
    }
}

/// Splits `text` into pieces of about `size` characters, as a model streams.
fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut count = 0;
    for (i, _) in text.char_indices() {
        if count == size {
            out.push(&text[start..i]);
            start = i;
            count = 0;
        }
        count += 1;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Sends a tool call whose JSON arguments stream in pieces.
async fn streamed_tool_call(
    ctx: &mut RunContext,
    name: &str,
    args: &Value,
    parent: Option<&str>,
) -> Result<String, AgentError> {
    let id = ctx.start_tool_call(name, parent).await?;
    for piece in pieces(&args.to_string(), 24) {
        ctx.tool_call_args(&id, piece).await?;
    }
    ctx.end_tool_call(&id).await?;
    Ok(id)
}

/// Text streaming, and a frontend tool (`change_background`) whose result comes
/// back as a tool message in the next run.
struct AgenticChat;

impl Agent for AgenticChat {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        if let Some(answer) = tool_answer(&input) {
            ctx.say(&format!("Done: {answer}")).await?;
            return Ok(());
        }
        let text = last_user_text(&input).unwrap_or_default();
        if text.to_lowercase().contains("background") {
            let color = ["red", "green", "blue", "yellow", "purple"]
                .into_iter()
                .find(|c| text.to_lowercase().contains(c))
                .unwrap_or("blue");
            let message = ctx.say("Changing the background.").await?;
            streamed_tool_call(
                ctx,
                "change_background",
                &json!({"background": color}),
                Some(&message),
            )
            .await?;
            return Ok(());
        }
        let reply = format!("Hello! You said: {text}");
        ctx.say_streamed(pieces(&reply, 6)).await?;
        Ok(())
    }
}

/// A backend tool: call and result both arrive in the stream.
struct BackendToolRendering;

impl Agent for BackendToolRendering {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let text = last_user_text(&input).unwrap_or_default();
        let city = text
            .rsplit(" in ")
            .next()
            .filter(|c| !c.is_empty() && *c != text)
            .unwrap_or("Lisbon")
            .trim_end_matches(['?', '.', '!'])
            .to_owned();
        let call = streamed_tool_call(ctx, "get_weather", &json!({"location": city}), None).await?;
        let weather = json!({"location": city, "temperature": 21, "conditions": "sunny"});
        ctx.tool_result(&call, weather.to_string()).await?;
        ctx.say_streamed(pieces(&format!("It is 21 °C and sunny in {city}."), 8))
            .await?;
        Ok(())
    }
}

/// A frontend tool (`generate_task_steps`) the user edits; the next run reads
/// the steps the user kept.
struct HumanInTheLoop;

impl Agent for HumanInTheLoop {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        if let Some(answer) = tool_answer(&input) {
            let kept = serde_json::from_str::<Value>(&answer)
                .ok()
                .and_then(|v| v.get("steps")?.as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter(|s| s.get("status").and_then(Value::as_str) == Some("enabled"))
                .count();
            ctx.say(&format!("Executing the {kept} selected steps."))
                .await?;
            return Ok(());
        }
        let steps: Vec<Value> = ["Open the fridge", "Take out the milk", "Pour a glass"]
            .iter()
            .map(|d| json!({"description": d, "status": "enabled"}))
            .collect();
        let message = ctx
            .say("Here is my plan; untick what you want to skip.")
            .await?;
        streamed_tool_call(
            ctx,
            "generate_task_steps",
            &json!({"steps": steps}),
            Some(&message),
        )
        .await?;
        Ok(())
    }
}

/// Progress of a long task as a state snapshot then JSON Patch deltas.
struct AgenticGenerativeUi;

impl Agent for AgenticGenerativeUi {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let names = ["Plan", "Research", "Draft", "Review", "Publish"];
        let mut state = json!({
            "steps": names.iter().map(|n| json!({"description": n, "status": "pending"})).collect::<Vec<_>>()
        });
        ctx.state_snapshot(state.clone()).await?;
        for i in 0..names.len() {
            state["steps"][i]["status"] = json!("completed");
            ctx.set_state(state.clone()).await?;
        }
        ctx.say("All five steps are completed.").await?;
        Ok(())
    }
}

/// A tool call rendered as UI (a haiku) by the frontend.
struct ToolBasedGenerativeUi;

impl Agent for ToolBasedGenerativeUi {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        if tool_answer(&input).is_some() {
            ctx.say("Enjoy the haiku.").await?;
            return Ok(());
        }
        let haiku = json!({
            "japanese": ["古池や", "蛙飛び込む", "水の音"],
            "english": ["An old silent pond", "A frog jumps into the pond", "Splash! Silence again."]
        });
        streamed_tool_call(ctx, "generate_haiku", &haiku, None).await?;
        Ok(())
    }
}

/// Bidirectional state: reads the recipe the client sends, returns it improved.
struct SharedState;

impl Agent for SharedState {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let mut recipe = input
            .state
            .as_ref()
            .and_then(|s| s.get("recipe").cloned())
            .unwrap_or_else(|| json!({"title": "Pancakes", "ingredients": [], "instructions": []}));
        if let Some(list) = recipe.get_mut("ingredients").and_then(Value::as_array_mut) {
            list.push(json!({"icon": "🧂", "name": "Salt", "amount": "a pinch"}));
        }
        if let Some(list) = recipe.get_mut("instructions").and_then(Value::as_array_mut) {
            list.push(json!("Season to taste."));
        }
        let mut state = input.state.clone().unwrap_or_else(|| json!({}));
        if !state.is_object() {
            state = json!({});
        }
        state["recipe"] = recipe;
        ctx.state_snapshot(state).await?;
        ctx.say("I added a pinch of salt and a last step.").await?;
        Ok(())
    }
}

/// `PredictState`: the document tool's argument streams into state while the
/// call is still open; the user then confirms the change.
struct PredictiveStateUpdates;

impl Agent for PredictiveStateUpdates {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        if let Some(answer) = tool_answer(&input) {
            let accepted = answer.contains("true") || answer.to_lowercase().contains("accept");
            ctx.say(if accepted {
                "Changes kept."
            } else {
                "Changes discarded."
            })
            .await?;
            return Ok(());
        }
        ctx.custom(
            "PredictState",
            json!([{"state_key": "document", "tool": "write_document_local", "tool_argument": "document"}]),
        )
        .await?;
        let document = "Once upon a time, a dragon guarded a library of forgotten protocols.";
        let write = streamed_tool_call(
            ctx,
            "write_document_local",
            &json!({"document": document}),
            None,
        )
        .await?;
        ctx.tool_result(&write, "Document written.").await?;
        let mut state = ctx.state().clone();
        if !state.is_object() {
            state = json!({});
        }
        state["document"] = json!(document);
        ctx.state_snapshot(state).await?;
        streamed_tool_call(ctx, "confirm_changes", &json!({}), None).await?;
        Ok(())
    }
}

/// Reasoning shown as thinking, then the answer.
struct Reasoning;

impl Agent for Reasoning {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let question = last_user_text(&input).unwrap_or_default();
        let id = ctx.start_reasoning().await?;
        for piece in pieces(&format!("The user asks: {question}. 6 times 7 is 42."), 10) {
            ctx.reasoning(&id, piece).await?;
        }
        ctx.end_reasoning(&id).await?;
        ctx.say("The answer is 42.").await?;
        Ok(())
    }
}

/// A subagent does part of the work inside the run.
struct Subagents;

impl Agent for Subagents {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let researcher = ctx
            .start_subagent("researcher", Some("Finds sources"))
            .await?;
        ctx.attribute_to(Some(&researcher));
        ctx.start_step("search").await?;
        ctx.say("Found three sources.").await?;
        ctx.finish_step("search").await?;
        ctx.attribute_to(None);
        ctx.finish_subagent(&researcher, Some(json!({"sources": 3})))
            .await?;
        ctx.say("The researcher found three sources.").await?;
        Ok(())
    }
}

/// Suspend and resume: the run ends with outcome `interrupt`; the next run's
/// `resume` answers it.
struct InterruptAgent;

impl Agent for InterruptAgent {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        if let Some(entry) = input.resume.as_ref().and_then(|r| r.first()) {
            let reply = match entry.status {
                ResumeStatus::Cancelled => "Cancelled; nothing was sent.",
                ResumeStatus::Resolved => {
                    let approved = entry
                        .payload
                        .as_ref()
                        .and_then(|p| p.get("approved"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    if approved {
                        "Approved: the email was sent."
                    } else {
                        "Not approved; nothing was sent."
                    }
                }
            };
            ctx.say(reply).await?;
            return Ok(());
        }
        ctx.say("I need your approval before sending the email.")
            .await?;
        let mut interrupt = Interrupt::new(format!("{}-approval", ctx.run_id()), "confirmation");
        interrupt.message = Some("Send the email?".into());
        interrupt.response_schema = json!({
            "type": "object",
            "properties": {"approved": {"type": "boolean"}},
            "required": ["approved"]
        })
        .as_object()
        .cloned();
        ctx.interrupt(interrupt);
        Ok(())
    }
}
