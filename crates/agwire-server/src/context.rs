//! [`RunContext`]: the emitters an agent streams through.
//!
//! Every event passes the official client's verification before it leaves, so
//! an agent cannot put an invalid stream on the wire: an event that would be
//! rejected is refused with [`Error::Invalid`] and never sent. The context also
//! remembers what is open, so the terminal event can close it for the agent.

use agwire_core::patch::{apply_patch, diff};
use agwire_core::verify::Verifier;
use agwire_core::*;
use axum::http::request::Parts;
use serde_json::{Map, Value};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::error::{AgentError, Error};

/// What happens to a run when its client disconnects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DisconnectPolicy {
    /// Cancel the run: the cancellation token fires and emitters return
    /// [`Error::Disconnected`]. The default, because with no stream to resume
    /// nobody will ever read what the run produces.
    #[default]
    Cancel,
    /// Let the run finish; what it emits is discarded.
    Finish,
}

/// Something the stream has open, in the order it was opened.
#[derive(Debug, Clone, PartialEq)]
enum Open {
    Text(String, Option<String>),
    ToolCall(String, Option<String>),
    Reasoning(String, Option<String>),
    ReasoningMessage(String, Option<String>),
    Step(String, Option<String>),
    Subagent(String),
}

/// Where events go: a bounded queue, read by the response body or by a
/// caller ([`crate::run_detached`]).
pub(crate) type Tx = crate::queue::EventSender;

#[derive(Debug)]
struct Sink {
    tx: Tx,
    policy: DisconnectPolicy,
    gone: bool,
}

impl Sink {
    /// Queues `event` now (unless the receiver is gone) and gives the wait
    /// for room: the future holds no event (see [`crate::EventSender::send`]).
    fn send(&mut self, event: Event) -> impl Future<Output = Result<(), Error>> + '_ {
        let Sink { tx, policy, gone } = self;
        let room = (!*gone).then(|| tx.send(event));
        async move {
            if let Some(room) = room
                && room.await.is_ok()
            {
                return Ok(());
            }
            *gone = true;
            match policy {
                DisconnectPolicy::Cancel => Err(Error::Disconnected),
                DisconnectPolicy::Finish => Ok(()),
            }
        }
    }
}

/// The run an agent is executing, and the only way it emits events.
///
/// Helpers come in two shapes: whole (`say`, `tool_call`, `think`) and
/// incremental (`start_text` / `text` / `end_text`, ...). Ids the helpers mint
/// are derived from the run id, so a deterministic agent produces the same
/// stream every time. Anything not covered by a helper goes through
/// [`RunContext::emit`], verified the same way.
#[derive(Debug)]
pub struct RunContext {
    thread_id: String,
    run_id: String,
    version: ProtocolVersion,
    sink: Sink,
    cancel: CancellationToken,
    verifier: Verifier,
    /// The first refusal for an invalid event: the run can only end in error.
    invalid: Option<String>,
    finished: bool,
    state: Value,
    open: Vec<Open>,
    /// Tool calls started and not answered by a `TOOL_CALL_RESULT`: the
    /// frontend's to answer, listed as `pendingToolCallIds`.
    unanswered: Vec<String>,
    interrupts: Vec<Interrupt>,
    result: Option<Value>,
    usage: Vec<TokenUsage>,
    subagent: Option<String>,
    minted: u64,
    /// The HTTP request's head (boxed: absent for detached runs, and one
    /// pointer in every context).
    request: Option<Box<Parts>>,
}

impl RunContext {
    /// A context for the run `input` asks for, sending into `tx`, announcing
    /// `version` (the one negotiated with the request).
    pub(crate) fn new(
        input: &RunAgentInput,
        version: ProtocolVersion,
        tx: Tx,
        policy: DisconnectPolicy,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            version,
            sink: Sink {
                tx,
                policy,
                gone: false,
            },
            cancel,
            verifier: Verifier::for_thread(input.thread_id.clone()),
            invalid: None,
            finished: false,
            state: input
                .state
                .clone()
                .unwrap_or_else(|| Value::Object(Map::new())),
            open: Vec::new(),
            unanswered: Vec::new(),
            interrupts: Vec::new(),
            result: None,
            usage: Vec::new(),
            subagent: None,
            minted: 0,
            request: None,
        }
    }

    /// Gives the run the head of the HTTP request that started it.
    pub(crate) fn with_request(mut self, head: Parts) -> Self {
        self.request = Some(Box::new(head));
        self
    }

    /// The head of the HTTP request that started this run: method, URI,
    /// headers, and the extensions the app's middleware inserted (an
    /// authenticated user, a tenant — see [`RunContext::extension`]).
    /// `None` for a run started without HTTP ([`crate::run_detached`]).
    ///
    /// The head is kept while the run streams; an agent that no longer
    /// needs it frees it with [`RunContext::take_request`].
    pub fn request(&self) -> Option<&Parts> {
        self.request.as_deref()
    }

    /// Takes the request's head out of the context (see [`RunContext::request`]).
    pub fn take_request(&mut self) -> Option<Parts> {
        self.request.take().map(|head| *head)
    }

    /// A value the app's middleware put in the request's extensions
    /// (`request.extensions_mut().insert(user)`), as axum's `Extension`
    /// extractor reads it.
    ///
    /// ```
    /// use agwire_core::RunAgentInput;
    /// use agwire_server::{Agent, AgentError, RunContext};
    ///
    /// #[derive(Clone)]
    /// struct User(String);
    ///
    /// struct Greeter;
    /// impl Agent for Greeter {
    ///     async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
    ///         let name = ctx.extension::<User>().map(|u| u.0.clone());
    ///         let name = name.ok_or_else(|| AgentError::new("no user").with_code("unauthenticated"))?;
    ///         ctx.say(&format!("Hello, {name}!")).await?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.request.as_ref()?.extensions.get::<T>()
    }

    /// The thread this run belongs to.
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// This run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The protocol version announced to the client (the lower of ours and
    /// the request's); events are adapted to it before they leave.
    pub fn protocol_version(&self) -> ProtocolVersion {
        self.version
    }

    /// The state as the client will hold it: the request's state, then every
    /// snapshot and delta this run sent.
    pub fn state(&self) -> &Value {
        &self.state
    }

    /// Whether the run was cancelled (its client disconnected under
    /// [`DisconnectPolicy::Cancel`], or the server is shutting down).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the run is cancelled; `select!` on it around long awaits.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// The run's cancellation token, to hand to work the agent spawns.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// A fresh id for a message, tool call or anything else, unique in this
    /// run and derived from its id.
    pub fn new_id(&mut self, kind: &str) -> String {
        self.minted += 1;
        format!("{}-{kind}-{}", self.run_id, self.minted)
    }

    /// Attributes the events helpers emit from now on to a subagent (`None`:
    /// the parent agent again).
    pub fn attribute_to(&mut self, subagent_run_id: Option<&str>) {
        self.subagent = subagent_run_id.map(str::to_owned);
    }

    /// Sends one event after checking it.
    ///
    /// Refused, and never sent: an event the official client would reject
    /// ([`Error::Invalid`]; the run will then end with `RUN_ERROR`), a
    /// `STATE_DELTA` that does not apply to [`RunContext::state`], and the
    /// run's own lifecycle events (`RUN_STARTED`, `RUN_FINISHED`, `RUN_ERROR`
    /// are sent for the agent). Fails with [`Error::Cancelled`] or
    /// [`Error::Disconnected`] once the run is cancelled.
    ///
    /// (Not an `async fn`: the event is checked and queued when this is
    /// called, and the future awaited holds no event, so an agent's future
    /// stays small however many helpers it nests.)
    pub fn emit(&mut self, event: Event) -> impl Future<Output = Result<(), Error>> + '_ {
        let sent = self
            .emittable(&event)
            .and_then(|()| self.send_checked(event));
        async move { sent?.await }
    }

    /// What `emit` refuses before the checks every event gets.
    fn emittable(&self, event: &Event) -> Result<(), Error> {
        if matches!(
            event,
            Event::RunStarted(_) | Event::RunFinished(_) | Event::RunError(_)
        ) {
            return Err(Error::Misuse(format!(
                "'{}' is sent for the agent: return from run() to end it",
                event.type_name()
            )));
        }
        if self.cancel.is_cancelled() {
            return Err(if self.sink.gone {
                Error::Disconnected
            } else {
                Error::Cancelled
            });
        }
        Ok(())
    }

    /// Checks `event` and queues it: the wait for room, or why not.
    fn send_checked(
        &mut self,
        mut event: Event,
    ) -> Result<impl Future<Output = Result<(), Error>> + '_, Error> {
        if self.finished {
            return Err(Error::Finished);
        }
        if let Some(message) = &self.invalid {
            return Err(Error::Misuse(format!(
                "the stream was already refused an invalid event ({message})"
            )));
        }
        let new_state = match &event {
            Event::StateDelta(e) => {
                let mut next = self.state.clone();
                apply_patch(&mut next, &e.delta).map_err(|err| {
                    Error::Misuse(format!("STATE_DELTA does not apply to the state: {err}"))
                })?;
                Some(next)
            }
            Event::StateSnapshot(e) => Some(e.snapshot.clone()),
            _ => None,
        };
        if let Err(err) = self.verifier.verify(&event) {
            self.invalid = Some(err.message.clone());
            return Err(Error::Invalid(err));
        }
        self.track(&event);
        if let Some(state) = new_state {
            self.state = state;
        }
        event.adapt_for_peer(self.version);
        Ok(self.sink.send(event))
    }

    fn track(&mut self, event: &Event) {
        // A run rarely has more than two things open at once (a step and a
        // message in it): room for two, not the four a first push makes,
        // since this lives as long as the run.
        if self.open.capacity() == 0 {
            self.open.reserve_exact(2);
        }
        let sub = || event.subagent_run_id().map(str::to_owned);
        let close = |open: &mut Vec<Open>, item: Open| {
            if let Some(i) = open.iter().rposition(|o| *o == item) {
                open.remove(i);
            }
        };
        match event {
            Event::TextMessageStart(e) => self.open.push(Open::Text(e.message_id.clone(), sub())),
            Event::TextMessageEnd(e) => {
                close(&mut self.open, Open::Text(e.message_id.clone(), sub()));
            }
            Event::ToolCallStart(e) => {
                self.open
                    .push(Open::ToolCall(e.tool_call_id.clone(), sub()));
                self.unanswered.push(e.tool_call_id.clone());
            }
            Event::ToolCallEnd(e) => {
                close(
                    &mut self.open,
                    Open::ToolCall(e.tool_call_id.clone(), sub()),
                );
            }
            Event::ToolCallResult(e) => self.unanswered.retain(|id| *id != e.tool_call_id),
            Event::ReasoningStart(e) => {
                self.open.push(Open::Reasoning(e.message_id.clone(), sub()));
            }
            Event::ReasoningEnd(e) => {
                close(&mut self.open, Open::Reasoning(e.message_id.clone(), sub()));
            }
            Event::ReasoningMessageStart(e) => {
                self.open
                    .push(Open::ReasoningMessage(e.message_id.clone(), sub()));
            }
            Event::ReasoningMessageEnd(e) => {
                close(
                    &mut self.open,
                    Open::ReasoningMessage(e.message_id.clone(), sub()),
                );
            }
            Event::StepStarted(e) => self.open.push(Open::Step(e.step_name.clone(), sub())),
            Event::StepFinished(e) => close(&mut self.open, Open::Step(e.step_name.clone(), sub())),
            Event::SubagentStarted(e) => self.open.push(Open::Subagent(e.subagent_run_id.clone())),
            Event::SubagentFinished(e) => {
                close(&mut self.open, Open::Subagent(e.subagent_run_id.clone()));
            }
            Event::SubagentError(e) => {
                close(&mut self.open, Open::Subagent(e.subagent_run_id.clone()));
            }
            _ => {}
        }
    }

    // ---- text -------------------------------------------------------------

    /// Opens an assistant text message; returns its id.
    pub async fn start_text(&mut self) -> Result<String, Error> {
        let message_id = self.new_id("msg");
        let event = Event::TextMessageStart(
            TextMessageStartEvent::new(message_id.clone())
                .role(TextMessageRole::Assistant)
                .attributed_to(self.subagent.clone()),
        );
        self.emit(event).await?;
        Ok(message_id)
    }

    /// Streams `delta` into an open text message (empty deltas are skipped:
    /// the protocol forbids them).
    pub async fn text(&mut self, message_id: &str, delta: &str) -> Result<(), Error> {
        if delta.is_empty() {
            return Ok(());
        }
        let event = Event::TextMessageContent(
            TextMessageContentEvent::new(message_id.to_owned(), delta.to_owned())
                .attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Closes a text message.
    pub async fn end_text(&mut self, message_id: &str) -> Result<(), Error> {
        let event = Event::TextMessageEnd(
            TextMessageEndEvent::new(message_id.to_owned()).attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Sends a whole assistant text message; returns its id.
    pub async fn say(&mut self, text: &str) -> Result<String, Error> {
        self.say_streamed([text]).await
    }

    /// Sends an assistant text message delta by delta; returns its id.
    pub async fn say_streamed<'a>(
        &mut self,
        deltas: impl IntoIterator<Item = &'a str>,
    ) -> Result<String, Error> {
        let id = self.start_text().await?;
        for delta in deltas {
            self.text(&id, delta).await?;
        }
        self.end_text(&id).await?;
        Ok(id)
    }

    // ---- tool calls ------------------------------------------------------

    /// Opens a tool call to `name`; returns its id. A call that no
    /// [`RunContext::tool_result`] answers is the frontend's: the run ends
    /// naming it in `pendingToolCallIds`.
    pub async fn start_tool_call(
        &mut self,
        name: &str,
        parent_message_id: Option<&str>,
    ) -> Result<String, Error> {
        let tool_call_id = self.new_id("call");
        let event = Event::ToolCallStart({
            let mut event = ToolCallStartEvent::new(tool_call_id.clone(), name.to_owned())
                .attributed_to(self.subagent.clone());
            event.parent_message_id = parent_message_id.map(str::to_owned);
            event
        });
        self.emit(event).await?;
        Ok(tool_call_id)
    }

    /// Streams a piece of a tool call's JSON arguments.
    pub async fn tool_call_args(&mut self, tool_call_id: &str, delta: &str) -> Result<(), Error> {
        if delta.is_empty() {
            return Ok(());
        }
        let event = Event::ToolCallArgs(
            ToolCallArgsEvent::new(tool_call_id.to_owned(), delta.to_owned())
                .attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Closes a tool call.
    pub async fn end_tool_call(&mut self, tool_call_id: &str) -> Result<(), Error> {
        let event = Event::ToolCallEnd(
            ToolCallEndEvent::new(tool_call_id.to_owned()).attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Sends a whole tool call with `args` as its arguments; returns its id.
    pub async fn tool_call(&mut self, name: &str, args: &Value) -> Result<String, Error> {
        let id = self.start_tool_call(name, None).await?;
        self.tool_call_args(&id, &args.to_string()).await?;
        self.end_tool_call(&id).await?;
        Ok(id)
    }

    /// Answers a tool call the agent ran itself (a backend tool); returns the
    /// tool message's id.
    pub async fn tool_result(
        &mut self,
        tool_call_id: &str,
        content: impl Into<Content>,
    ) -> Result<String, Error> {
        if !self.unanswered.iter().any(|id| id == tool_call_id) {
            return Err(Error::Misuse(format!(
                "no unanswered tool call '{tool_call_id}' in this run"
            )));
        }
        let message_id = self.new_id("tool");
        let event = Event::ToolCallResult(
            ToolCallResultEvent::new(message_id.clone(), tool_call_id.to_owned(), content.into())
                .role(ToolRole::Tool)
                .attributed_to(self.subagent.clone()),
        );
        self.emit(event).await?;
        Ok(message_id)
    }

    // ---- reasoning -------------------------------------------------------

    /// Opens a reasoning span with one reasoning message in it; returns the id
    /// both share.
    pub async fn start_reasoning(&mut self) -> Result<String, Error> {
        let message_id = self.new_id("reasoning");
        let sub = self.subagent.clone();
        self.emit(Event::ReasoningStart(
            ReasoningStartEvent::new(message_id.clone()).attributed_to(sub.clone()),
        ))
        .await?;
        self.emit(Event::ReasoningMessageStart(
            ReasoningMessageStartEvent::new(message_id.clone(), ReasoningRole::Reasoning)
                .attributed_to(sub),
        ))
        .await?;
        Ok(message_id)
    }

    /// Streams reasoning text into an open reasoning message.
    pub async fn reasoning(&mut self, message_id: &str, delta: &str) -> Result<(), Error> {
        if delta.is_empty() {
            return Ok(());
        }
        let event = Event::ReasoningMessageContent(
            ReasoningMessageContentEvent::new(message_id.to_owned(), delta.to_owned())
                .attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Closes the reasoning message and its span.
    pub async fn end_reasoning(&mut self, message_id: &str) -> Result<(), Error> {
        let sub = self.subagent.clone();
        self.emit(Event::ReasoningMessageEnd(
            ReasoningMessageEndEvent::new(message_id.to_owned()).attributed_to(sub.clone()),
        ))
        .await?;
        self.emit(Event::ReasoningEnd(
            ReasoningEndEvent::new(message_id.to_owned()).attributed_to(sub),
        ))
        .await
    }

    /// Sends a whole reasoning span; returns its id.
    pub async fn think(&mut self, text: &str) -> Result<String, Error> {
        let id = self.start_reasoning().await?;
        self.reasoning(&id, text).await?;
        self.end_reasoning(&id).await?;
        Ok(id)
    }

    // ---- steps and subagents --------------------------------------------

    /// Starts a named step.
    pub async fn start_step(&mut self, name: &str) -> Result<(), Error> {
        let event = Event::StepStarted(
            StepStartedEvent::new(name.to_owned()).attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Finishes a named step.
    pub async fn finish_step(&mut self, name: &str) -> Result<(), Error> {
        let event = Event::StepFinished(
            StepFinishedEvent::new(name.to_owned()).attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Starts a subagent; returns its subagent run id. Attribute its events
    /// with [`RunContext::attribute_to`].
    pub async fn start_subagent(
        &mut self,
        name: &str,
        description: Option<&str>,
    ) -> Result<String, Error> {
        let subagent_run_id = self.new_id("subagent");
        let event = Event::SubagentStarted({
            let mut event = SubagentStartedEvent::new(subagent_run_id.clone(), name.to_owned());
            event.description = description.map(str::to_owned);
            event.parent_subagent_run_id = self.subagent.clone();
            event
        });
        self.emit(event).await?;
        Ok(subagent_run_id)
    }

    /// Finishes a subagent successfully.
    pub async fn finish_subagent(
        &mut self,
        subagent_run_id: &str,
        result: Option<Value>,
    ) -> Result<(), Error> {
        let event = Event::SubagentFinished({
            let mut event = SubagentFinishedEvent::new(subagent_run_id.to_owned());
            event.result = result;
            event
        });
        self.emit(event).await
    }

    /// Ends a subagent with an error (the parent run goes on).
    pub async fn fail_subagent(
        &mut self,
        subagent_run_id: &str,
        message: &str,
    ) -> Result<(), Error> {
        let event = Event::SubagentError(SubagentErrorEvent::new(
            subagent_run_id.to_owned(),
            message.to_owned(),
        ));
        self.emit(event).await
    }

    // ---- state, messages, activity, custom ---------------------------------

    /// Replaces the client's state.
    pub async fn state_snapshot(&mut self, snapshot: Value) -> Result<(), Error> {
        let event = Event::StateSnapshot(
            StateSnapshotEvent::new(snapshot).attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Patches the client's state; refused if it does not apply to
    /// [`RunContext::state`].
    pub async fn state_delta(&mut self, delta: Vec<PatchOperation>) -> Result<(), Error> {
        let event =
            Event::StateDelta(StateDeltaEvent::new(delta).attributed_to(self.subagent.clone()));
        self.emit(event).await
    }

    /// Moves the client's state to `state` with the smallest delta this
    /// context can compute from the state it last sent; sends nothing when
    /// they are equal.
    pub async fn set_state(&mut self, state: Value) -> Result<(), Error> {
        let delta = diff(&self.state, &state);
        if delta.is_empty() {
            return Ok(());
        }
        self.state_delta(delta).await
    }

    /// Replaces the client's messages.
    pub async fn messages_snapshot(&mut self, messages: Vec<Message>) -> Result<(), Error> {
        let event = Event::MessagesSnapshot(MessagesSnapshotEvent::new(messages));
        self.emit(event).await
    }

    /// Creates or replaces an activity message.
    pub async fn activity_snapshot(
        &mut self,
        message_id: &str,
        activity_type: &str,
        content: Map<String, Value>,
    ) -> Result<(), Error> {
        let event = Event::ActivitySnapshot(
            ActivitySnapshotEvent::new(message_id.to_owned(), activity_type.to_owned(), content)
                .attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Patches an activity message's content.
    pub async fn activity_delta(
        &mut self,
        message_id: &str,
        activity_type: &str,
        patch: Vec<PatchOperation>,
    ) -> Result<(), Error> {
        let event = Event::ActivityDelta(
            ActivityDeltaEvent::new(message_id.to_owned(), activity_type.to_owned(), patch)
                .attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Sends an application-defined event.
    pub async fn custom(&mut self, name: &str, value: Value) -> Result<(), Error> {
        let event = Event::Custom(
            CustomEvent::new(name.to_owned(), value).attributed_to(self.subagent.clone()),
        );
        self.emit(event).await
    }

    /// Passes through an event from another system.
    pub async fn raw(&mut self, event: Value, source: Option<&str>) -> Result<(), Error> {
        let event = Event::Raw({
            let mut raw = RawEvent::new(event).attributed_to(self.subagent.clone());
            raw.source = source.map(str::to_owned);
            raw
        });
        self.emit(event).await
    }

    // ---- how the run ends ------------------------------------------------

    /// Suspends the run: it ends with outcome `interrupt` carrying every
    /// interrupt added; the next request's `resume` answers them.
    pub fn interrupt(&mut self, interrupt: Interrupt) {
        self.interrupts.push(interrupt);
    }

    /// Sets `RUN_FINISHED.result`.
    pub fn set_result(&mut self, result: Value) {
        self.result = Some(result);
    }

    /// Adds token usage reported with the terminal event.
    pub fn add_usage(&mut self, usage: TokenUsage) {
        self.usage.push(usage);
    }

    /// Sends `RUN_STARTED`.
    pub(crate) async fn start(&mut self, parent_run_id: Option<String>) -> Result<(), Error> {
        let event = Event::RunStarted({
            let mut event = RunStartedEvent::new(self.thread_id.clone(), self.run_id.clone())
                .protocol_version(self.version.to_string());
            event.parent_run_id = parent_run_id;
            event
        });
        self.send_checked(event)?.await
    }

    /// Sends the terminal event for the agent's `outcome`: closes what is
    /// open and finishes, or reports the error. A cancelled run finishes with
    /// outcome `cancelled`.
    pub(crate) async fn finish(&mut self, outcome: Result<(), AgentError>) {
        if self.finished || self.sink.gone {
            self.finished = true;
            return;
        }
        let failure = match (&self.invalid, outcome) {
            (Some(message), _) => Some(
                AgentError::new(format!("the agent emitted an invalid event: {message}"))
                    .with_code("invalid_event"),
            ),
            (None, Err(error)) if !self.cancel.is_cancelled() => Some(error),
            (None, _) => None,
        };
        let terminal = match failure {
            Some(error) => self.run_error(error),
            None => match self.close_all().await {
                Ok(()) => self.run_finished(),
                Err(error) => self.run_error(AgentError::from(error)),
            },
        };
        let terminal = match self.verifier.verify(&terminal) {
            Ok(()) => terminal,
            Err(err) => self.run_error(
                AgentError::new(format!("the run could not be finished: {err}"))
                    .with_code("invalid_event"),
            ),
        };
        // Best effort: a client that left cannot be told anything.
        let _ = self.sink.send(terminal).await;
        self.finished = true;
    }

    async fn close_all(&mut self) -> Result<(), Error> {
        while let Some(item) = self.open.last().cloned() {
            let event = match item {
                Open::Text(message_id, subagent_run_id) => Event::TextMessageEnd(
                    TextMessageEndEvent::new(message_id).attributed_to(subagent_run_id),
                ),
                Open::ToolCall(tool_call_id, subagent_run_id) => Event::ToolCallEnd(
                    ToolCallEndEvent::new(tool_call_id).attributed_to(subagent_run_id),
                ),
                Open::Reasoning(message_id, subagent_run_id) => Event::ReasoningEnd(
                    ReasoningEndEvent::new(message_id).attributed_to(subagent_run_id),
                ),
                Open::ReasoningMessage(message_id, subagent_run_id) => Event::ReasoningMessageEnd(
                    ReasoningMessageEndEvent::new(message_id).attributed_to(subagent_run_id),
                ),
                Open::Step(step_name, subagent_run_id) => Event::StepFinished(
                    StepFinishedEvent::new(step_name).attributed_to(subagent_run_id),
                ),
                Open::Subagent(subagent_run_id) => {
                    Event::SubagentFinished(SubagentFinishedEvent::new(subagent_run_id))
                }
            };
            let before = self.open.len();
            self.send_checked(event)?.await?;
            if self.open.len() == before {
                // Tracking and the verifier disagree; never loop forever.
                self.open.pop();
            }
        }
        Ok(())
    }

    fn run_finished(&mut self) -> Event {
        let outcome = if self.cancel.is_cancelled() {
            Some(RunFinishedOutcome::Cancelled)
        } else if !self.interrupts.is_empty() {
            Some(RunFinishedOutcome::Interrupt {
                interrupts: std::mem::take(&mut self.interrupts),
            })
        } else if !self.unanswered.is_empty() {
            Some(RunFinishedOutcome::Success {
                pending_tool_call_ids: Some(std::mem::take(&mut self.unanswered)),
            })
        } else {
            None
        };
        Event::RunFinished({
            let mut event = RunFinishedEvent::new(self.thread_id.clone(), self.run_id.clone());
            event.result = self.result.take();
            event.outcome = outcome;
            event.usage = self.take_usage();
            event
        })
    }

    fn run_error(&mut self, error: AgentError) -> Event {
        Event::RunError({
            let mut event = RunErrorEvent::new(error.message);
            event.code = error.code;
            event.usage = self.take_usage();
            event
        })
    }

    fn take_usage(&mut self) -> Option<Vec<TokenUsage>> {
        (!self.usage.is_empty()).then(|| std::mem::take(&mut self.usage))
    }
}
