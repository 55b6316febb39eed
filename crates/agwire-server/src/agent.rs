//! The [`Agent`] trait: what a developer implements to host an agent.

use std::future::Future;
use std::pin::Pin;

use agwire_core::RunAgentInput;

use crate::context::RunContext;
use crate::error::AgentError;

/// An AG-UI agent.
///
/// `run` receives the request's input and a [`RunContext`] to emit through,
/// and returns when the run is over. `RUN_STARTED` has already been sent when
/// it is called; the terminal event is sent for it afterwards: `RUN_FINISHED`
/// (with the result, interrupts, pending tool calls and usage set on the
/// context) when it returns `Ok`, `RUN_ERROR` when it returns `Err` or panics.
/// Messages, tool calls, reasoning and steps it left open are closed first, so
/// the stream is always complete.
///
/// ```
/// use agwire_core::RunAgentInput;
/// use agwire_server::{Agent, AgentError, RunContext};
///
/// struct Echo;
///
/// impl Agent for Echo {
///     async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
///         let heard = input.messages.len();
///         ctx.say(&format!("I have {heard} messages.")).await?;
///         Ok(())
///     }
/// }
/// ```
pub trait Agent: Send + Sync + 'static {
    /// Runs the agent for one request.
    fn run(
        &self,
        input: RunAgentInput,
        ctx: &mut RunContext,
    ) -> impl Future<Output = Result<(), AgentError>> + Send;
}

/// A boxed future, for agents behind a trait object.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`Agent`] in object-safe form, so endpoints can hold any agent without
/// being generic over it. Implemented for every [`Agent`].
pub trait DynAgent: Send + Sync + 'static {
    /// [`Agent::run`], boxed.
    fn run_boxed<'a>(
        &'a self,
        input: RunAgentInput,
        ctx: &'a mut RunContext,
    ) -> BoxFuture<'a, Result<(), AgentError>>;
}

impl<A: Agent> DynAgent for A {
    fn run_boxed<'a>(
        &'a self,
        input: RunAgentInput,
        ctx: &'a mut RunContext,
    ) -> BoxFuture<'a, Result<(), AgentError>> {
        Box::pin(self.run(input, ctx))
    }
}
