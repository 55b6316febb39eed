//! The rule families a report is judged by, each with the page of the 1.1
//! specification (or standard) that states its rules, and the one place where a
//! failure of the consumer pipeline is attributed to a family.

use agwire_core::Error as CoreError;
use serde::Serialize;

/// A group of rules, reported pass / fail / not exercised.
///
/// The event families use the pages the official 1.1 conformance streams
/// name (`specPage`); the transport families use the 1.1 transports page,
/// and resumption the WHATWG event-stream standard, which is where
/// `Last-Event-ID` is defined (AG-UI itself leaves resumption to the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Family {
    /// Runs and steps: `RUN_STARTED` first, one run at a time, nothing after
    /// the terminal event, nothing left open at `RUN_FINISHED`, every run on
    /// the input's thread, no truncated run.
    Lifecycle,
    /// Text messages and tool calls: start → content → end, chunk rules.
    Streaming,
    /// Tool calls: frontend tools answered and continued, results naming a
    /// real call.
    ToolCalls,
    /// State snapshots, JSON Patch deltas that apply, message snapshots.
    State,
    /// Reasoning spans and messages.
    Reasoning,
    /// Activity snapshots and deltas.
    Activity,
    /// Subagent invocations and attribution.
    Subagents,
    /// Event shapes: a malformed known field is fatal; unknown members are
    /// stripped and unknown events dropped (with warnings).
    Processing,
    /// `protocolVersion` declarations.
    Versioning,
    /// Interrupts and their resume.
    Interrupts,
    /// A malformed `RunAgentInput` is refused with a 4xx before any stream.
    RunInput,
    /// The SSE binding: content type, `data:` frames ended by a blank line,
    /// LF line endings, UTF-8, JSON in every frame.
    Sse,
    /// The protobuf binding: exact media type, length-prefixed frames.
    Protobuf,
    /// `Accept` negotiation: SSE unless the client admits protobuf.
    Negotiation,
    /// A client that aborts mid-stream: the thread takes a new run.
    Cancellation,
    /// `Last-Event-ID` on a stream whose frames carry ids: exactly the rest.
    Resumption,
    /// A capabilities document, when the server advertises one.
    Capabilities,
}

impl Family {
    /// Every family, in report order.
    pub const ALL: [Family; 17] = [
        Family::Lifecycle,
        Family::Streaming,
        Family::ToolCalls,
        Family::State,
        Family::Reasoning,
        Family::Activity,
        Family::Subagents,
        Family::Processing,
        Family::Versioning,
        Family::Interrupts,
        Family::RunInput,
        Family::Sse,
        Family::Protobuf,
        Family::Negotiation,
        Family::Cancellation,
        Family::Resumption,
        Family::Capabilities,
    ];

    /// The family's name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Family::Lifecycle => "lifecycle",
            Family::Streaming => "streaming",
            Family::ToolCalls => "tool-calls",
            Family::State => "state",
            Family::Reasoning => "reasoning",
            Family::Activity => "activity",
            Family::Subagents => "subagents",
            Family::Processing => "processing",
            Family::Versioning => "versioning",
            Family::Interrupts => "interrupts",
            Family::RunInput => "run-input",
            Family::Sse => "sse",
            Family::Protobuf => "protobuf",
            Family::Negotiation => "negotiation",
            Family::Cancellation => "cancellation",
            Family::Resumption => "resumption",
            Family::Capabilities => "capabilities",
        }
    }

    /// Where the family's rules are written: a page of docs.ag-ui.com, or the
    /// standard that defines them.
    pub fn spec(self) -> &'static str {
        match self {
            Family::Lifecycle => "/spec/1.1/events/lifecycle",
            Family::Streaming => "/spec/1.1/basic/patterns/streaming",
            Family::ToolCalls => "/spec/1.1/events/tool-calls",
            Family::State => "/spec/1.1/events/state",
            Family::Reasoning => "/spec/1.1/events/reasoning",
            Family::Activity => "/spec/1.1/events/activity",
            Family::Subagents => "/spec/1.1/events/subagents",
            Family::Processing => "/spec/1.1/basic/processing",
            Family::Versioning => "/spec/1.1/basic/versioning",
            Family::Interrupts => "/spec/1.1/basic/patterns/interrupt-resume",
            Family::RunInput => "/spec/1.1/basic/run-input",
            Family::Sse | Family::Protobuf | Family::Negotiation | Family::Cancellation => {
                "/spec/1.1/basic/transports"
            }
            Family::Resumption => "WHATWG HTML, server-sent events: Last-Event-ID",
            Family::Capabilities => "/spec/1.1/schema (AgentCapabilities)",
        }
    }

    /// Parses [`Family::name`].
    pub fn from_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The family whose rule the consumer pipeline enforced when it rejected
    /// `event_type` with `error`.
    ///
    /// The verifier's messages are the official client's, word for word, so
    /// they are stable: the attribution reads them (which rule an owner
    /// mismatch or a run boundary breaks is in the sentence, not in the
    /// event's type).
    pub(crate) fn of_rejection(event_type: Option<&str>, error: &CoreError) -> Family {
        match error {
            CoreError::Json(_) => Family::Sse,
            CoreError::Decode(_) => Family::Processing,
            CoreError::Chunk(_) => Family::Streaming,
            CoreError::Verify(verify) => {
                let message = verify.message.as_str();
                let ty = event_type.unwrap_or("");
                if message.contains("subagent") || message.contains("SUBAGENT") {
                    Family::Subagents
                } else if message.starts_with("First event")
                    || message.contains("The run has already")
                    || message.contains("while a run is still active")
                    || message.contains("threadId")
                    || ty.starts_with("RUN_")
                    || ty.starts_with("STEP_")
                {
                    Family::Lifecycle
                } else if ty.starts_with("REASONING_") {
                    Family::Reasoning
                } else if ty.starts_with("ACTIVITY_") {
                    Family::Activity
                } else if ty.starts_with("TOOL_CALL_RESULT") {
                    Family::ToolCalls
                } else {
                    Family::Streaming
                }
            }
            _ => Family::Processing,
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agwire_core::pipeline::Pipeline;

    /// Feeds `events` to the official client's pipeline and attributes the
    /// rejection.
    fn attribute(events: &[&str]) -> Family {
        let mut pipeline = Pipeline::new("t", Vec::new(), serde_json::json!({})).checking_thread();
        for event in events {
            if let Err(error) = pipeline.push_json(event) {
                let value: serde_json::Value = serde_json::from_str(event).unwrap();
                return Family::of_rejection(value["type"].as_str(), &error);
            }
        }
        panic!("accepted: {events:?}");
    }

    #[test]
    fn rejections_are_attributed_to_the_family_of_the_rule() {
        let started = r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#;
        for (events, family) in [
            (
                vec![r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#],
                Family::Lifecycle,
            ),
            (
                vec![r#"{"type":"RUN_STARTED","threadId":"other","runId":"r"}"#],
                Family::Lifecycle,
            ),
            (
                vec![
                    started,
                    r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}"#,
                ],
                Family::Streaming,
            ),
            (
                vec![
                    started,
                    r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}"#,
                ],
                Family::Streaming,
            ),
            (
                vec![started, r#"{"type":"TEXT_MESSAGE_CHUNK","delta":"x"}"#],
                Family::Streaming,
            ),
            (
                vec![
                    started,
                    r#"{"type":"REASONING_MESSAGE_CONTENT","messageId":"m","delta":"x"}"#,
                ],
                Family::Reasoning,
            ),
            (
                vec![
                    started,
                    r#"{"type":"SUBAGENT_FINISHED","subagentRunId":"s"}"#,
                ],
                Family::Subagents,
            ),
            (
                vec![
                    started,
                    r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":7}"#,
                ],
                Family::Processing,
            ),
            (
                vec![started, r#"{"type":"STEP_FINISHED","stepName":"s"}"#],
                Family::Lifecycle,
            ),
        ] {
            assert_eq!(attribute(&events), family, "{events:?}");
        }
    }
}
