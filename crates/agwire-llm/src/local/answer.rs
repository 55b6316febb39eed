//! What a local model is told and what its words become: the conversation
//! as the chat template's messages (tools described in the system prompt,
//! calls written as `<tool_call>` blocks), and the generated text turned
//! back into the events every provider streams.
//!
//! The `<tool_call>{"name": …, "arguments": …}</tool_call>` form is the one
//! Qwen, Hermes and SmolLM-style models are trained on; whatever a model was
//! trained on, the grammar holds it to this one once it opens the tag.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::chat::{ChatEvent, ChatMessage, ChatRequest, FinishReason, ToolChoice, UserPart};
use crate::error::Error;

/// The tag that opens a call (and triggers the call grammar).
pub(crate) const CALL_OPEN: &str = "<tool_call>";
/// The tag that closes it.
pub(crate) const CALL_CLOSE: &str = "</tool_call>";

/// How the tools of a request are offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Calls {
    /// No tools (or `tool_choice: none`): text only.
    Off,
    /// The model chooses: text, or a call once it opens the tag.
    Auto,
    /// The answer is a call.
    Forced,
}

impl Calls {
    pub(crate) fn of(request: &ChatRequest) -> Self {
        if request.tools.is_empty() {
            return Self::Off;
        }
        match &request.tool_choice {
            None | Some(ToolChoice::Auto) => Self::Auto,
            Some(ToolChoice::None) => Self::Off,
            Some(ToolChoice::Required | ToolChoice::Named(_)) => Self::Forced,
        }
    }
}

/// The chat template's messages: (role, content).
pub(crate) fn messages(request: &ChatRequest, calls: Calls) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(request.messages.len() + 1);
    let instructions = (calls != Calls::Off).then(|| tool_instructions(request));
    let mut told = false;
    for message in &request.messages {
        match message {
            ChatMessage::System(text) => {
                let mut text = text.clone();
                if let (Some(tools), false) = (&instructions, told) {
                    text.push_str("\n\n");
                    text.push_str(tools);
                    told = true;
                }
                out.push(("system".into(), text));
            }
            ChatMessage::User { content } => {
                let text = content
                    .iter()
                    .map(|part| match part {
                        UserPart::Text(t) => t.as_str(),
                        // A text model sees that there was an image.
                        UserPart::ImageUrl(_) => "[image]",
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push(("user".into(), text));
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
                ..
            } => {
                let mut text = content.clone().unwrap_or_default();
                for call in tool_calls {
                    let arguments: Value = serde_json::from_str(&call.arguments)
                        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
                    let body = serde_json::json!({"name": call.name, "arguments": arguments});
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!("{CALL_OPEN}{body}{CALL_CLOSE}"));
                }
                out.push(("assistant".into(), text));
            }
            ChatMessage::Tool { content, .. } => {
                out.push((
                    "tool".into(),
                    format!("<tool_response>\n{content}\n</tool_response>"),
                ));
            }
        }
    }
    if let (Some(tools), false) = (instructions, told) {
        out.insert(0, ("system".into(), tools));
    }
    out
}

/// The tools, described for the system prompt.
fn tool_instructions(request: &ChatRequest) -> String {
    let mut text = String::from(
        "You can call tools. To call one, answer with only this, on its own:\n<tool_call>{\"name\": \"<tool name>\", \"arguments\": {<its arguments>}}</tool_call>\n\nTools:\n",
    );
    for tool in &request.tools {
        text.push_str(&format!(
            "- {}: {}\n  arguments (JSON Schema): {}\n",
            tool.name,
            tool.description.trim(),
            tool.parameters
        ));
    }
    if let Some(ToolChoice::Named(name)) = &request.tool_choice {
        text.push_str(&format!("\nCall {name} now.\n"));
    }
    text
}

/// Turns generated text into events as it comes: text streams at once,
/// except what may be the start of a call's tag; a call is announced
/// when it closes (its arguments are then whole and valid).
#[derive(Debug)]
pub(crate) struct Answer {
    calls: Calls,
    /// Text not yet streamed (a possible start of the tag) or, once a call
    /// opened, the call so far.
    pending: String,
    in_call: bool,
    made: Vec<(String, String)>,
}

static CALL_IDS: AtomicU64 = AtomicU64::new(0);

fn call_id() -> String {
    // Unique within the process and across restarts (the clock), like a
    // provider's `call_…` ids.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or_default();
    format!(
        "call_{now:x}{:04x}",
        CALL_IDS.fetch_add(1, Ordering::Relaxed)
    )
}

impl Answer {
    pub(crate) fn new(calls: Calls) -> Self {
        Self {
            calls,
            pending: String::new(),
            in_call: calls == Calls::Forced,
            made: Vec::new(),
        }
    }

    /// More generated text; the events it makes now.
    pub(crate) fn push(&mut self, piece: &str) -> Result<Vec<ChatEvent>, Error> {
        self.pending.push_str(piece);
        let mut events = Vec::new();
        loop {
            if self.in_call {
                // The close tag ends the call only after whole JSON: a
                // string inside may hold the tag's text.
                let open = self
                    .pending
                    .find(CALL_OPEN)
                    .map_or(0, |i| i + CALL_OPEN.len());
                let Some((end, (name, arguments))) = self
                    .pending
                    .match_indices(CALL_CLOSE)
                    .filter(|(end, _)| *end >= open)
                    .find_map(|(end, _)| {
                        parse_call(&self.pending[open..end]).ok().map(|c| (end, c))
                    })
                else {
                    return Ok(events);
                };
                self.pending.drain(..end + CALL_CLOSE.len());
                let index = self.made.len();
                let id = call_id();
                events.push(ChatEvent::ToolCallStart {
                    index,
                    id,
                    name: name.clone(),
                });
                events.push(ChatEvent::ToolCallArgs {
                    index,
                    delta: arguments.clone(),
                });
                self.made.push((name, arguments));
                self.in_call = false;
                continue;
            }
            if self.calls == Calls::Off {
                if !self.pending.is_empty() {
                    events.push(ChatEvent::TextDelta(std::mem::take(&mut self.pending)));
                }
                return Ok(events);
            }
            if let Some(start) = self.pending.find(CALL_OPEN) {
                let before: String = self.pending.drain(..start).collect();
                if !before.trim().is_empty() {
                    events.push(ChatEvent::TextDelta(before));
                }
                self.in_call = true;
                continue;
            }
            // Stream all but a tail that could begin the tag.
            let keep = partial_tag(&self.pending);
            let cut = self.pending.len() - keep;
            if cut > 0 {
                let text: String = self.pending.drain(..cut).collect();
                events.push(ChatEvent::TextDelta(text));
            }
            return Ok(events);
        }
    }

    /// The end of generation: what is left, and the finish.
    pub(crate) fn finish(mut self, out_of_tokens: bool) -> Result<Vec<ChatEvent>, Error> {
        if self.in_call {
            let start: String = self.pending.chars().take(300).collect();
            return Err(Error::Local(format!(
                "generation stopped inside a tool call (out of tokens or context): {start}"
            )));
        }
        let mut events = Vec::new();
        if !self.pending.is_empty() {
            events.push(ChatEvent::TextDelta(std::mem::take(&mut self.pending)));
        }
        events.push(ChatEvent::Finish(if !self.made.is_empty() {
            FinishReason::ToolCalls
        } else if out_of_tokens {
            FinishReason::Length
        } else {
            FinishReason::Stop
        }));
        Ok(events)
    }
}

/// How many bytes at the end of `text` could be the start of the tag.
fn partial_tag(text: &str) -> usize {
    (1..CALL_OPEN.len())
        .rev()
        .find(|&n| {
            text.len() >= n
                && text.is_char_boundary(text.len() - n)
                && text.ends_with(&CALL_OPEN[..n])
        })
        .unwrap_or(0)
}

/// `{"name": …, "arguments": {…}}` → (name, arguments as JSON text).
fn parse_call(json: &str) -> Result<(String, String), Error> {
    let value: Value = serde_json::from_str(json.trim())
        .map_err(|e| Error::Local(format!("unreadable tool call {json:?}: {e}")))?;
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::Local(format!("tool call without a name: {json}")))?;
    let arguments = value
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    Ok((name.to_owned(), arguments.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ToolCall, ToolSpec};

    fn texts(events: &[ChatEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                ChatEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn text_streams_at_once_but_a_possible_tag_waits() {
        let mut answer = Answer::new(Calls::Auto);
        assert_eq!(texts(&answer.push("Hello <").unwrap_or_default()), "Hello ");
        assert_eq!(texts(&answer.push("b>").unwrap_or_default()), "<b>");
        assert_eq!(texts(&answer.push(" <tool").unwrap_or_default()), " ");
        let events = answer
            .push("_call>{\"name\": \"t\", \"arguments\": {\"a\": 1}}</tool_call>")
            .unwrap_or_default();
        assert!(
            matches!(&events[0], ChatEvent::ToolCallStart { index: 0, name, .. } if name == "t")
        );
        assert_eq!(
            events[1],
            ChatEvent::ToolCallArgs {
                index: 0,
                delta: "{\"a\":1}".into()
            }
        );
        let end = answer.finish(false).unwrap_or_default();
        assert_eq!(end, vec![ChatEvent::Finish(FinishReason::ToolCalls)]);
    }

    #[test]
    fn the_close_tag_inside_a_string_does_not_end_the_call() {
        let mut answer = Answer::new(Calls::Forced);
        let events = answer
            .push("<tool_call>{\"name\": \"t\", \"arguments\": {\"a\": \"x</tool_call>y\"}}</tool_call>")
            .unwrap_or_default();
        assert_eq!(
            events[1],
            ChatEvent::ToolCallArgs {
                index: 0,
                delta: "{\"a\":\"x</tool_call>y\"}".into()
            }
        );
    }

    #[test]
    fn a_call_cut_off_is_an_error_not_a_broken_call() {
        let mut answer = Answer::new(Calls::Forced);
        assert!(answer.push("<tool_call>{\"name\": \"t\", \"argu").is_ok());
        assert!(answer.finish(true).is_err());
    }

    #[test]
    fn tools_are_described_in_the_system_prompt_and_calls_replayed_as_tags() {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system("Be brief."),
                ChatMessage::user("hi"),
                ChatMessage::Assistant {
                    content: None,
                    reasoning: None,
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "t".into(),
                        arguments: "{\"a\":1}".into(),
                    }],
                },
                ChatMessage::Tool {
                    tool_call_id: "c1".into(),
                    content: "42".into(),
                },
            ],
            tools: vec![ToolSpec {
                name: "t".into(),
                description: "a tool".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            ..ChatRequest::default()
        };
        let messages = messages(&request, Calls::of(&request));
        assert!(messages[0].1.starts_with("Be brief.") && messages[0].1.contains("- t: a tool"));
        assert_eq!(
            messages[2].1,
            "<tool_call>{\"name\":\"t\",\"arguments\":{\"a\":1}}</tool_call>"
        );
        assert_eq!(messages[3].0, "tool");
    }
}
