//! The built-in deterministic agent (no model: embedders and tests that need
//! a run without an LLM): the fixed two stages (`router`, then `worker`), a streamed reply, and one
//! backend tool call (`get_current_time`) when the message asks for the time.

use agwire_core::{Message, RunAgentInput};
use agwire_server::{Agent, AgentError, RunContext};
use serde_json::json;

/// The built-in agent.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinAgent {
    token_delay: std::time::Duration,
}

impl BuiltinAgent {
    /// Pauses `delay` before each streamed word (demos, and runs that must
    /// stay in flight long enough to be cancelled or crashed).
    pub fn with_token_delay(delay: std::time::Duration) -> Self {
        Self { token_delay: delay }
    }
}

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
            let call = ctx.tool_call("get_current_time", &json!({})).await?;
            let now = jiff::Timestamp::now().to_string();
            ctx.tool_result(&call, json!({"utc": now}).to_string())
                .await?;
        }
        let reply = format!("You said: {text}");
        let words: Vec<&str> = reply.split_inclusive(' ').collect();
        if self.token_delay.is_zero() {
            ctx.say_streamed(words).await?;
        } else {
            let id = ctx.start_text().await?;
            for word in words {
                tokio::select! {
                    () = tokio::time::sleep(self.token_delay) => {}
                    () = ctx.cancelled() => {}
                }
                // Fails once cancelled: the run then ends as cancelled.
                ctx.text(&id, word).await?;
            }
            ctx.end_text(&id).await?;
        }
        ctx.finish_step("worker").await?;
        Ok(())
    }
}
