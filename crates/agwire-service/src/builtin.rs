//! The built-in deterministic agent used until the LLM runtime arrives: the
//! fixed two stages (`router`, then `worker`), a streamed reply, and one
//! backend tool call (`get_time`) when the message asks for the time.

use agwire_core::{Message, RunAgentInput};
use agwire_server::{Agent, AgentError, RunContext};
use serde_json::json;

/// The built-in agent.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinAgent;

impl Agent for BuiltinAgent {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let text = input
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User(u) => Some(u.content.text()),
                _ => None,
            })
            .unwrap_or_default();
        ctx.start_step("router").await?;
        ctx.finish_step("router").await?;
        ctx.start_step("worker").await?;
        if text.to_lowercase().contains("time") {
            let call = ctx.tool_call("get_time", &json!({})).await?;
            let now = jiff::Timestamp::now().to_string();
            ctx.tool_result(&call, json!({"utc": now}).to_string())
                .await?;
        }
        let reply = format!("You said: {text}");
        let words: Vec<&str> = reply.split_inclusive(' ').collect();
        ctx.say_streamed(words).await?;
        ctx.finish_step("worker").await?;
        Ok(())
    }
}
