//! [`Subscriber`]: hooks mirroring the official client's `AgentSubscriber`.

use std::collections::HashMap;

use agwire_core::apply::Session;
use agwire_core::{
    CustomEvent, Event, Message, MessagesSnapshotEvent, RawEvent, RunAgentInput, RunErrorEvent,
    RunFinishedEvent, RunStartedEvent, StateDeltaEvent, StateSnapshotEvent, StepFinishedEvent,
    StepStartedEvent, TextMessageStartEvent, ToolCall, ToolCallResultEvent, ToolCallStartEvent,
};

use crate::client::Client;
use crate::error::Error;
use crate::stream::RunStream;
use crate::summary::RunSummary;

/// What every hook sees: the event, the session after it was applied, and
/// the run's input.
///
/// Unlike the official client, hooks run after the event was applied (the
/// session already includes it) and cannot change the session: a hook that
/// needs the state before an event keeps it from the previous hook call.
#[derive(Debug, Clone, Copy)]
pub struct Hook<'a> {
    /// The event.
    pub event: &'a Event,
    /// The session after the event.
    pub session: &'a Session,
    /// The run's input.
    pub input: &'a RunAgentInput,
}

/// Run hooks; every method has a no-op default, implement the ones you need.
/// Names follow the official client's `AgentSubscriber`.
#[allow(unused_variables)]
pub trait Subscriber: Send {
    /// Every event, before the per-type hook.
    fn on_event(&mut self, hook: Hook<'_>) {}
    /// `RUN_STARTED`.
    fn on_run_started(&mut self, event: &RunStartedEvent, hook: Hook<'_>) {}
    /// `RUN_FINISHED`.
    fn on_run_finished(&mut self, event: &RunFinishedEvent, hook: Hook<'_>) {}
    /// `RUN_ERROR` (from the agent, or the synthesized `abort`).
    fn on_run_error(&mut self, event: &RunErrorEvent, hook: Hook<'_>) {}
    /// `STEP_STARTED`.
    fn on_step_started(&mut self, event: &StepStartedEvent, hook: Hook<'_>) {}
    /// `STEP_FINISHED`.
    fn on_step_finished(&mut self, event: &StepFinishedEvent, hook: Hook<'_>) {}
    /// `TEXT_MESSAGE_START`.
    fn on_text_message_start(&mut self, event: &TextMessageStartEvent, hook: Hook<'_>) {}
    /// `TEXT_MESSAGE_CONTENT`, with the message's text so far.
    fn on_text_message_content(&mut self, delta: &str, buffer: &str, hook: Hook<'_>) {}
    /// `TEXT_MESSAGE_END`, with the message's whole text.
    fn on_text_message_end(&mut self, buffer: &str, hook: Hook<'_>) {}
    /// `TOOL_CALL_START`.
    fn on_tool_call_start(&mut self, event: &ToolCallStartEvent, hook: Hook<'_>) {}
    /// `TOOL_CALL_ARGS`, with the tool's name and the arguments so far.
    fn on_tool_call_args(&mut self, name: &str, delta: &str, buffer: &str, hook: Hook<'_>) {}
    /// `TOOL_CALL_END`, with the tool's name and whole arguments.
    fn on_tool_call_end(&mut self, name: &str, args: &str, hook: Hook<'_>) {}
    /// `TOOL_CALL_RESULT`.
    fn on_tool_call_result(&mut self, event: &ToolCallResultEvent, hook: Hook<'_>) {}
    /// `STATE_SNAPSHOT`.
    fn on_state_snapshot(&mut self, event: &StateSnapshotEvent, hook: Hook<'_>) {}
    /// `STATE_DELTA`.
    fn on_state_delta(&mut self, event: &StateDeltaEvent, hook: Hook<'_>) {}
    /// `MESSAGES_SNAPSHOT`.
    fn on_messages_snapshot(&mut self, event: &MessagesSnapshotEvent, hook: Hook<'_>) {}
    /// `CUSTOM`.
    fn on_custom(&mut self, event: &CustomEvent, hook: Hook<'_>) {}
    /// `RAW`.
    fn on_raw(&mut self, event: &RawEvent, hook: Hook<'_>) {}
    /// `REASONING_MESSAGE_CONTENT`, with the reasoning text so far.
    fn on_reasoning_message_content(&mut self, delta: &str, buffer: &str, hook: Hook<'_>) {}
    /// The messages changed.
    fn on_messages_changed(&mut self, session: &Session) {}
    /// The state changed.
    fn on_state_changed(&mut self, session: &Session) {}
    /// A message appeared that was not there before.
    fn on_new_message(&mut self, message: &Message, session: &Session) {}
    /// A tool call appeared on an assistant message.
    fn on_new_tool_call(&mut self, tool_call: &ToolCall, session: &Session) {}
    /// The run failed (transport, decoding, verification). Not called for a
    /// `RUN_ERROR` from the agent, which is a normal end.
    fn on_run_failed(&mut self, error: &Error) {}
    /// The run is over, however it ended.
    fn on_run_finalized(&mut self) {}
}

/// A subscriber that does nothing: for [`crate::Client::run_to_completion`]
/// when no hook is wanted.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl Subscriber for NoHooks {}

impl Client {
    /// Runs to the end, calling `subscriber`'s hooks, and returns what the run
    /// folded into. Verification is always on here: folding needs it.
    ///
    /// A `RUN_ERROR` from the agent is not an `Err`: it is in the summary's
    /// [`RunSummary::error`], as the official client resolves such runs.
    pub async fn run_to_completion(
        &self,
        input: &RunAgentInput,
        subscriber: &mut dyn Subscriber,
    ) -> Result<RunSummary, Error> {
        let mut client = self.clone();
        client.verify = true;
        let mut stream = match client.run(input).await {
            Ok(stream) => stream,
            Err(error) => {
                subscriber.on_run_failed(&error);
                subscriber.on_run_finalized();
                return Err(error);
            }
        };
        let outcome = dispatch(&mut stream, subscriber).await;
        subscriber.on_run_finalized();
        outcome?;
        Ok(RunSummary::new(&input.messages, stream.into_session()))
    }
}

/// Reads `stream` to its end, calling the hooks.
pub(crate) async fn dispatch(
    stream: &mut RunStream,
    subscriber: &mut dyn Subscriber,
) -> Result<(), Error> {
    let mut texts: HashMap<String, String> = HashMap::new();
    let mut reasoning: HashMap<String, String> = HashMap::new();
    let mut calls: HashMap<String, (String, String)> = HashMap::new();
    // Before the first event the session is what the run folds from.
    let mut seen_messages: std::collections::HashSet<String> = stream
        .session()
        .messages
        .iter()
        .map(|m| m.id().to_owned())
        .collect();
    let mut seen_calls: std::collections::HashSet<String> = std::collections::HashSet::new();
    while let Some(next) = stream.next().await {
        let event = match next {
            Ok(event) => event,
            Err(error) => {
                subscriber.on_run_failed(&error);
                return Err(error);
            }
        };
        let (messages_changed, state_changed) = stream.last_changes();
        let session = stream.session();
        let hook = Hook {
            event: &event,
            session,
            input: stream.input(),
        };
        subscriber.on_event(hook);
        match &event {
            Event::RunStarted(e) => subscriber.on_run_started(e, hook),
            Event::RunFinished(e) => subscriber.on_run_finished(e, hook),
            Event::RunError(e) => subscriber.on_run_error(e, hook),
            Event::StepStarted(e) => subscriber.on_step_started(e, hook),
            Event::StepFinished(e) => subscriber.on_step_finished(e, hook),
            Event::TextMessageStart(e) => {
                texts.insert(e.message_id.clone(), String::new());
                subscriber.on_text_message_start(e, hook);
            }
            Event::TextMessageContent(e) => {
                let buffer = texts.entry(e.message_id.clone()).or_default();
                buffer.push_str(&e.delta);
                subscriber.on_text_message_content(&e.delta, buffer, hook);
            }
            Event::TextMessageEnd(e) => {
                let buffer = texts.remove(&e.message_id).unwrap_or_default();
                subscriber.on_text_message_end(&buffer, hook);
            }
            Event::ToolCallStart(e) => {
                calls.insert(
                    e.tool_call_id.clone(),
                    (e.tool_call_name.clone(), String::new()),
                );
                subscriber.on_tool_call_start(e, hook);
            }
            Event::ToolCallArgs(e) => {
                let (name, buffer) = calls.entry(e.tool_call_id.clone()).or_default();
                buffer.push_str(&e.delta);
                subscriber.on_tool_call_args(name, &e.delta, buffer, hook);
            }
            Event::ToolCallEnd(e) => {
                let (name, args) = calls.remove(&e.tool_call_id).unwrap_or_default();
                subscriber.on_tool_call_end(&name, &args, hook);
            }
            Event::ToolCallResult(e) => subscriber.on_tool_call_result(e, hook),
            Event::StateSnapshot(e) => subscriber.on_state_snapshot(e, hook),
            Event::StateDelta(e) => subscriber.on_state_delta(e, hook),
            Event::MessagesSnapshot(e) => subscriber.on_messages_snapshot(e, hook),
            Event::Custom(e) => subscriber.on_custom(e, hook),
            Event::Raw(e) => subscriber.on_raw(e, hook),
            Event::ReasoningMessageContent(e) => {
                let buffer = reasoning.entry(e.message_id.clone()).or_default();
                buffer.push_str(&e.delta);
                subscriber.on_reasoning_message_content(&e.delta, buffer, hook);
            }
            _ => {}
        }
        if messages_changed {
            for message in &session.messages {
                if seen_messages.insert(message.id().to_owned()) {
                    subscriber.on_new_message(message, session);
                }
                if let Message::Assistant(m) = message {
                    for call in m.tool_calls.iter().flatten() {
                        if seen_calls.insert(call.id.clone()) {
                            subscriber.on_new_tool_call(call, session);
                        }
                    }
                }
            }
            subscriber.on_messages_changed(session);
        }
        if state_changed {
            subscriber.on_state_changed(session);
        }
    }
    Ok(())
}
