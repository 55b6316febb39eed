//! [`HttpAgent`]: one conversation with one agent, kept from run to run, as
//! the official client's `HttpAgent` keeps it.

use agwire_core::apply::{RunEnd, Session};
use agwire_core::{Content, Context, Event, Interrupt, Message, ResumeEntry, RunAgentInput, Tool};
use serde_json::Value;

use crate::client::Client;
use crate::error::Error;
use crate::stream::{AbortHandle, RunStream};
use crate::subscriber::{NoHooks, Subscriber, dispatch};
use crate::summary::RunSummary;

/// A fresh id: a random (v4) UUID, as the official client mints them.
fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A conversation with the agent behind one [`Client`]: the thread id, the
/// messages and the state that every run sends, and that every run's events
/// update — the official client's `HttpAgent`.
///
/// ```rust,no_run
/// # async fn demo() -> Result<(), agwire_client::Error> {
/// let mut agent = agwire_client::HttpAgent::new("http://127.0.0.1:8000/agent")?;
/// agent.add_user_message("What is the weather in Lisbon?");
/// let summary = agent.run().await?;
/// println!("{:?}", summary.new_messages);
/// // The reply is in the agent's messages, and the next run sends it.
/// agent.add_user_message("And tomorrow?");
/// agent.run().await?;
/// # Ok(())
/// # }
/// ```
///
/// # What a run keeps
///
/// A run starts from the agent's messages and state; its events (streamed
/// messages, tool calls and results, `MESSAGES_SNAPSHOT`, `STATE_SNAPSHOT`,
/// `STATE_DELTA`, ...) are verified and folded into them, and what they
/// folded into becomes the agent's when the run ends — **however it ends**:
///
/// - with `RUN_FINISHED`, or with a `RUN_ERROR` from the agent or an
///   [abort](AgentRun::abort_handle) (both are `Ok`: see
///   [`RunSummary::error`]);
/// - with a failure part-way (the connection dropped and could not be
///   resumed, [`Error::Truncated`], an idle timeout, a verification error),
///   which is returned as the `Err`: the agent keeps the earlier
///   conversation, the messages you added, and everything the run delivered
///   before the failure — a message cut off mid-stream stays with the text
///   it had, as the official client keeps it (edit
///   [`HttpAgent::messages_mut`] before retrying if it should not be sent);
/// - with the run dropped before its end (an [`AgentRun`] dropped, or the
///   future of [`HttpAgent::run`] cancelled by a timeout): likewise, what it
///   delivered is kept.
///
/// A run that got no response at all (connection refused, a non-2xx answer)
/// changes nothing: call it again to retry.
///
/// The agent always verifies (folding needs it), whatever the client's
/// [`ClientBuilder::verify`](crate::ClientBuilder::verify) says.
#[derive(Debug, Clone)]
pub struct HttpAgent {
    client: Client,
    thread_id: String,
    messages: Vec<Message>,
    state: Value,
    tools: Vec<Tool>,
    context: Vec<Context>,
    forwarded_props: Option<Value>,
    pending_interrupts: Vec<Interrupt>,
    pending_tool_call_ids: Vec<String>,
}

/// Builds an [`HttpAgent`]: the official client's `new HttpAgent({...})`
/// options, and the tools, context and forwarded props of every run.
#[derive(Debug, Clone)]
pub struct HttpAgentBuilder {
    agent: HttpAgent,
}

impl HttpAgentBuilder {
    /// The conversation's thread id (a random UUID when not set).
    pub fn thread_id(mut self, thread_id: impl Into<String>) -> Self {
        self.agent.thread_id = thread_id.into();
        self
    }

    /// The conversation so far (`initialMessages`; none by default).
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        self.agent.messages = messages;
        self
    }

    /// The state the first run sends (`initialState`; `{}` by default).
    pub fn state(mut self, state: Value) -> Self {
        self.agent.state = state;
        self
    }

    /// Tools every run offers, unless its [`RunOptions::tools`] replaces them.
    pub fn tools(mut self, tools: Vec<Tool>) -> Self {
        self.agent.tools = tools;
        self
    }

    /// Context every run sends, unless its [`RunOptions::context`] replaces it.
    pub fn context(mut self, context: Vec<Context>) -> Self {
        self.agent.context = context;
        self
    }

    /// `forwardedProps` every run sends (`{}` by default), unless its
    /// [`RunOptions::forwarded_props`] replaces them.
    pub fn forwarded_props(mut self, props: Value) -> Self {
        self.agent.forwarded_props = Some(props);
        self
    }

    /// The agent.
    pub fn build(self) -> HttpAgent {
        self.agent
    }
}

/// What one run sends besides the conversation: the official client's
/// `runAgent({runId, tools, context, forwardedProps, resume})`.
///
/// ```
/// use agwire_client::RunOptions;
/// let options = RunOptions::new()
///     .run_id("run-7")
///     .forwarded_props(serde_json::json!({"model": "small"}));
/// assert_eq!(options.run_id.as_deref(), Some("run-7"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RunOptions {
    /// The run's id (a random UUID when `None`).
    pub run_id: Option<String>,
    /// Tools for this run, replacing the agent's
    /// ([`HttpAgentBuilder::tools`]) when `Some`.
    pub tools: Option<Vec<Tool>>,
    /// Context for this run, replacing the agent's when `Some`.
    pub context: Option<Vec<Context>>,
    /// `forwardedProps` for this run, replacing the agent's when `Some`.
    pub forwarded_props: Option<Value>,
    /// Answers to the interrupts the previous run left
    /// ([`HttpAgent::pending_interrupts`]).
    pub resume: Option<Vec<ResumeEntry>>,
}

impl RunOptions {
    /// No options: a fresh run id, the agent's tools, context and props.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the run's id.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// Offers these tools (instead of the agent's).
    pub fn tools(mut self, tools: Vec<Tool>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Sends this context (instead of the agent's).
    pub fn context(mut self, context: Vec<Context>) -> Self {
        self.context = Some(context);
        self
    }

    /// Sends these `forwardedProps` (instead of the agent's).
    pub fn forwarded_props(mut self, props: Value) -> Self {
        self.forwarded_props = Some(props);
        self
    }

    /// Answers interrupts of the previous run.
    pub fn resume(mut self, resume: Vec<ResumeEntry>) -> Self {
        self.resume = Some(resume);
        self
    }
}

impl HttpAgent {
    /// An agent at `url`, with a new thread and the client's defaults.
    pub fn new(url: impl Into<String>) -> Result<Self, Error> {
        Ok(Self::builder(Client::new(url)?).build())
    }

    /// A builder for an agent reached through `client` (its headers, bearer
    /// token, timeouts, formats and reconnection).
    pub fn builder(client: Client) -> HttpAgentBuilder {
        let mut client = client;
        client.verify = true;
        HttpAgentBuilder {
            agent: HttpAgent {
                client,
                thread_id: new_id(),
                messages: Vec::new(),
                state: Value::Object(Default::default()),
                tools: Vec::new(),
                context: Vec::new(),
                forwarded_props: None,
                pending_interrupts: Vec::new(),
                pending_tool_call_ids: Vec::new(),
            },
        }
    }

    /// The client the runs go through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The conversation's thread id, the same for every run.
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// The conversation.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The conversation, to edit before the next run.
    pub fn messages_mut(&mut self) -> &mut Vec<Message> {
        &mut self.messages
    }

    /// Replaces the conversation.
    pub fn set_messages(&mut self, messages: Vec<Message>) {
        self.messages = messages;
    }

    /// The shared state.
    pub fn state(&self) -> &Value {
        &self.state
    }

    /// Replaces the shared state (the next run sends it).
    pub fn set_state(&mut self, state: Value) {
        self.state = state;
    }

    /// Interrupts the last finished run left, which the next run's
    /// [`RunOptions::resume`] should answer.
    pub fn pending_interrupts(&self) -> &[Interrupt] {
        &self.pending_interrupts
    }

    /// Frontend tool calls the last finished run left and no
    /// [`HttpAgent::add_tool_result`] answered yet.
    pub fn pending_tool_call_ids(&self) -> &[String] {
        &self.pending_tool_call_ids
    }

    /// Appends a message to the conversation.
    pub fn add_message(&mut self, message: Message) {
        self.messages.push(message);
    }

    /// Appends a user message with a fresh id; returns the id.
    pub fn add_user_message(&mut self, content: impl Into<Content>) -> String {
        let id = new_id();
        self.messages.push(Message::user(id.clone(), content));
        id
    }

    /// Answers the frontend tool call `tool_call_id` (see
    /// [`RunSummary::pending_tool_call_ids`]): appends a `tool` message with a
    /// fresh id, which the next run sends; returns the id.
    pub fn add_tool_result(
        &mut self,
        tool_call_id: impl Into<String>,
        content: impl Into<Content>,
    ) -> String {
        let tool_call_id = tool_call_id.into();
        self.pending_tool_call_ids.retain(|id| *id != tool_call_id);
        let id = new_id();
        self.messages
            .push(Message::tool(id.clone(), tool_call_id, content));
        id
    }

    /// Runs the agent on the conversation and waits for the end: the
    /// official client's `runAgent()`.
    ///
    /// The summary's [`RunSummary::new_messages`] are the messages the run
    /// added; the agent now holds them (see [what a run
    /// keeps](HttpAgent#what-a-run-keeps)).
    pub async fn run(&mut self) -> Result<RunSummary, Error> {
        self.run_with_subscriber(RunOptions::default(), &mut NoHooks)
            .await
    }

    /// [`HttpAgent::run`] with a run id, tools, context, props or resume.
    pub async fn run_with(&mut self, options: RunOptions) -> Result<RunSummary, Error> {
        self.run_with_subscriber(options, &mut NoHooks).await
    }

    /// [`HttpAgent::run_with`], calling `subscriber`'s hooks as
    /// [`Client::run_to_completion`] does.
    pub async fn run_with_subscriber(
        &mut self,
        options: RunOptions,
        subscriber: &mut dyn Subscriber,
    ) -> Result<RunSummary, Error> {
        let mut run = match self.run_stream(options).await {
            Ok(run) => run,
            Err(error) => {
                subscriber.on_run_failed(&error);
                subscriber.on_run_finalized();
                return Err(error);
            }
        };
        let outcome = match &mut run.phase {
            Phase::Running(stream) => dispatch(stream, subscriber).await,
            Phase::Ended(_) => Ok(()),
        };
        subscriber.on_run_finalized();
        let summary = run.take_summary();
        outcome.map(|()| summary)
    }

    /// Starts a run and returns its events one by one: for printing text as
    /// it streams. The run borrows the agent until it is dropped, and updates
    /// it when it ends (or is dropped):
    ///
    /// ```rust,no_run
    /// use agwire_client::{HttpAgent, RunOptions, core::Event};
    ///
    /// # async fn demo(agent: &mut HttpAgent) -> Result<(), agwire_client::Error> {
    /// agent.add_user_message("Tell me a story");
    /// let mut run = agent.run_stream(RunOptions::new()).await?;
    /// while let Some(event) = run.next().await {
    ///     if let Event::TextMessageContent(text) = event? {
    ///         print!("{}", text.delta);
    ///     }
    /// }
    /// let added = run.summary().map_or(0, |s| s.new_messages.len());
    /// drop(run);
    /// println!("\n{added} new messages; {} in all", agent.messages().len());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_stream(&mut self, options: RunOptions) -> Result<AgentRun<'_>, Error> {
        let input = self.prepare(options);
        let seed = (self.messages.clone(), self.state.clone());
        let stream = self.client.start(&input, Some(seed)).await?;
        Ok(AgentRun {
            abort: stream.abort_handle(),
            agent: self,
            phase: Phase::Running(Box::new(stream)),
        })
    }

    /// The input of the next run, shaped as the official client shapes it
    /// (activity messages are not sent; they stay the agent's own).
    fn prepare(&self, options: RunOptions) -> RunAgentInput {
        let run_id = options.run_id.unwrap_or_else(new_id);
        let mut input =
            RunAgentInput::prepare(&self.thread_id, run_id, &self.messages, &self.state);
        input.tools = options.tools.unwrap_or_else(|| self.tools.clone());
        input.context = options.context.unwrap_or_else(|| self.context.clone());
        if let Some(props) = options
            .forwarded_props
            .or_else(|| self.forwarded_props.clone())
        {
            input.forwarded_props = Some(props);
        }
        input.resume = options.resume;
        input
    }

    /// Takes what a run folded as the conversation.
    fn absorb(&mut self, session: &Session) {
        self.messages.clone_from(&session.messages);
        self.state.clone_from(&session.state);
        // Replaced at every RUN_FINISHED, as in the session; a run that did
        // not finish leaves the earlier ones unanswered.
        if let Some(RunEnd::Finished { .. }) = session.last_run {
            self.pending_interrupts
                .clone_from(&session.pending_interrupts);
            self.pending_tool_call_ids
                .clone_from(&session.pending_tool_call_ids);
        }
    }
}

/// A run of an [`HttpAgent`], event by event ([`HttpAgent::run_stream`]).
///
/// When [`AgentRun::next`] returns `None` or an error, or when the run is
/// dropped before that, what the run folded becomes the agent's (see [what a
/// run keeps](HttpAgent#what-a-run-keeps)); dropping it early also closes
/// the connection.
#[derive(Debug)]
pub struct AgentRun<'a> {
    agent: &'a mut HttpAgent,
    phase: Phase,
    abort: AbortHandle,
}

#[derive(Debug)]
enum Phase {
    Running(Box<RunStream>),
    /// The agent has what the run folded.
    Ended(Box<RunSummary>),
}

impl AgentRun<'_> {
    /// The next event, verified and folded; `None` after the run's end.
    pub async fn next(&mut self) -> Option<Result<Event, Error>> {
        let Phase::Running(stream) = &mut self.phase else {
            return None;
        };
        let next = stream.next().await;
        if !matches!(next, Some(Ok(_))) {
            self.settle();
        }
        next
    }

    /// A handle that aborts this run: it then ends with a `RUN_ERROR` coded
    /// `abort`, and the agent keeps what arrived before.
    pub fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    /// What the events so far folded into: the agent's conversation as it
    /// will be when the run ends.
    pub fn session(&self) -> &Session {
        match &self.phase {
            Phase::Running(stream) => stream.session(),
            Phase::Ended(summary) => &summary.session,
        }
    }

    /// The run's summary, once it ended ([`AgentRun::next`] returned `None`
    /// or an error).
    pub fn summary(&self) -> Option<&RunSummary> {
        match &self.phase {
            Phase::Running(_) => None,
            Phase::Ended(summary) => Some(summary),
        }
    }

    /// Takes the run's summary, once it ended.
    pub fn into_summary(mut self) -> Option<RunSummary> {
        matches!(self.phase, Phase::Ended(_)).then(|| self.take_summary())
    }

    /// Ends the run (if it has not ended): the agent takes what it folded.
    fn settle(&mut self) {
        if matches!(self.phase, Phase::Running(_)) {
            let summary = self.take_summary();
            self.phase = Phase::Ended(Box::new(summary));
        }
    }

    /// Ends the run (if it has not ended) and takes its summary, leaving an
    /// empty one.
    fn take_summary(&mut self) -> RunSummary {
        let empty = Phase::Ended(Box::new(RunSummary::new(&[], Session::default())));
        match std::mem::replace(&mut self.phase, empty) {
            Phase::Running(stream) => {
                let summary = RunSummary::new(&self.agent.messages, stream.into_session());
                self.agent.absorb(&summary.session);
                summary
            }
            Phase::Ended(summary) => *summary,
        }
    }
}

impl Drop for AgentRun<'_> {
    fn drop(&mut self) {
        self.settle();
    }
}
