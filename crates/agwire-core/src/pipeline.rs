//! The consumer pipeline, in the order the 1.1 spec and the official client use:
//! decode → compatibility boundary → enforcement → chunk expansion →
//! verification → apply.

use serde_json::Value;

use crate::apply::Session;
use crate::chunk::ChunkExpander;
use crate::compat::{CompatBoundary, PeerCeiling};
use crate::message::Message;
use crate::verify::Verifier;
use crate::version::{DeclaredVersion, ProtocolVersion, judge_declared};
use crate::{Error, Event, RunAgentInput, Warning, WarningKind};

/// Folds one response stream (one or more runs) into a [`Session`].
///
/// Feed it events as they arrive; each call returns the events that reach the
/// application (chunks expanded, unknown events dropped, everything verified and
/// applied). The first error ends the stream: stop feeding it.
///
/// ```
/// use agwire_core::pipeline::Pipeline;
/// let mut pipeline = Pipeline::new("t1", Vec::new(), serde_json::json!({}));
/// for line in [
///     r#"{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}"#,
///     r#"{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"Hello"}"#,
///     r#"{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}"#,
/// ] {
///     pipeline.push_json(line)?;
/// }
/// assert_eq!(pipeline.session().messages.len(), 1);
/// # Ok::<(), agwire_core::Error>(())
/// ```
#[derive(Debug)]
pub struct Pipeline {
    thread_id: String,
    compat: CompatBoundary,
    peer: PeerCeiling,
    chunks: ChunkExpander,
    verifier: Verifier,
    session: Session,
    ours: ProtocolVersion,
    delivered: Vec<Event>,
    expanded: Vec<Event>,
    warnings: Vec<Warning>,
    /// (messages, state) changed by the last push.
    changed: (bool, bool),
}

impl Pipeline {
    /// A pipeline for a stream on `thread_id`, starting from the consumer's
    /// messages and state.
    ///
    /// Verification is exactly the official 1.0 client's, which does not check
    /// that the runs name `thread_id`; [`Pipeline::checking_thread`] adds the 1.1
    /// rule that they must.
    pub fn new(thread_id: impl Into<String>, messages: Vec<Message>, state: Value) -> Self {
        let thread_id = thread_id.into();
        Self {
            thread_id,
            compat: CompatBoundary::new(),
            peer: PeerCeiling::default(),
            chunks: ChunkExpander::new(),
            verifier: Verifier::new(),
            session: Session::new(messages, state),
            ours: ProtocolVersion::CURRENT,
            delivered: Vec::new(),
            expanded: Vec::new(),
            warnings: Vec::new(),
            changed: (false, false),
        }
    }

    /// A pipeline for the response to `input` (its thread, messages and state).
    pub fn for_input(input: &RunAgentInput) -> Self {
        Self::new(
            input.thread_id.clone(),
            input.messages.clone(),
            input
                .state
                .clone()
                .unwrap_or_else(|| Value::Object(Default::default())),
        )
    }

    /// Also rejects runs that name a thread other than this stream's (1.1 rule).
    pub fn checking_thread(mut self) -> Self {
        self.verifier = Verifier::for_thread(self.thread_id.clone());
        self
    }

    /// Judges producers' declared versions against `version` instead of ours
    /// (a client that pins itself lower).
    pub fn speaking(mut self, version: ProtocolVersion) -> Self {
        self.ours = version;
        self
    }

    /// Applies the official client's version-gated downgrades for a producer
    /// known to speak at most `ceiling` (e.g. `"0.0.57"`: subagent events dropped).
    pub fn with_peer_ceiling(mut self, ceiling: &str) -> Self {
        self.peer = PeerCeiling::parse(ceiling).unwrap_or_default();
        self
    }

    /// Feeds one event as JSON text.
    pub fn push_json(&mut self, text: &str) -> Result<&[Event], Error> {
        let decoded = Event::from_json(text)?;
        self.report(decoded.warnings);
        self.push(decoded.value)
    }

    /// Feeds one event as a JSON value.
    pub fn push_value(&mut self, value: Value) -> Result<&[Event], Error> {
        let decoded = Event::from_value(value)?;
        self.report(decoded.warnings);
        self.push(decoded.value)
    }

    /// Feeds one decoded event.
    pub fn push(&mut self, event: Event) -> Result<&[Event], Error> {
        self.delivered.clear();
        self.changed = (false, false);
        let translated = self.compat.translate(event)?;
        self.report(translated.warnings);
        let (event, warning) = self.peer.downgrade_event(translated.value);
        self.report(warning);
        let Some(event) = event else {
            return Ok(&self.delivered);
        };
        if let Event::Unknown(unknown) = &event {
            self.report([Warning::new(
                WarningKind::UnknownEventDropped,
                format!(
                    "Dropping unrecognised event '{}': no middleware translated it and the protocol does not describe it.",
                    unknown.event_type
                ),
            )]);
            return Ok(&self.delivered);
        }
        self.expanded.clear();
        self.chunks.push(event, &mut self.expanded)?;
        for event in self.expanded.drain(..) {
            self.verifier.verify(&event)?;
            if let Event::RunStarted(started) = &event
                && let Some(warning) =
                    version_warning(started.protocol_version.as_deref(), self.ours)
            {
                warning.trace();
                self.warnings.push(warning);
            }
            let applied = self.session.apply(&event);
            self.changed.0 |= applied.messages_changed;
            self.changed.1 |= applied.state_changed;
            for warning in &applied.warnings {
                warning.trace();
            }
            self.warnings.extend(applied.warnings);
            self.delivered.push(event);
        }
        Ok(&self.delivered)
    }

    /// Whether the last [`Pipeline::push`] changed the messages and the state
    /// (where the reference client notifies `onMessagesChanged` and
    /// `onStateChanged`).
    pub fn last_changes(&self) -> (bool, bool) {
        self.changed
    }

    /// What the stream has folded into so far.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Takes the folded session.
    pub fn into_session(self) -> Session {
        self.session
    }

    /// The warnings reported since the last call (each was also traced).
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.warnings)
    }

    fn report(&mut self, warnings: impl IntoIterator<Item = Warning>) {
        for warning in warnings {
            warning.trace();
            self.warnings.push(warning);
        }
    }
}

fn version_warning(declared: Option<&str>, ours: ProtocolVersion) -> Option<Warning> {
    let declared = declared?;
    let message = match judge_declared(Some(declared), ours) {
        DeclaredVersion::Compatible => return None,
        DeclaredVersion::Uninterpretable => format!(
            "The producer declared protocol version '{declared}', which this client cannot interpret."
        ),
        DeclaredVersion::Newer => format!(
            "The producer speaks protocol {declared}; this client speaks {ours}. Unrecognised material will be stripped with warnings."
        ),
    };
    Some(Warning::new(WarningKind::ProtocolVersion, message))
}
