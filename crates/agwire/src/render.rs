//! Turning a run's events into readable terminal output.

use std::io::{self, Write};

use agwire_core::{Content, Event, RunFinishedOutcome};

/// Renders events as they arrive: text inline as it streams, tool calls with
/// their arguments, results, state changes, steps and the run's end.
#[derive(Debug, Default)]
pub(crate) struct Renderer {
    /// Something is printed on the current line (a message or call is open).
    mid_line: bool,
}

impl Renderer {
    fn line(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.mid_line {
            writeln!(out)?;
            self.mid_line = false;
        }
        Ok(())
    }

    /// Writes one event.
    pub(crate) fn event(&mut self, event: &Event, out: &mut dyn Write) -> io::Result<()> {
        match event {
            Event::RunStarted(e) => {
                self.line(out)?;
                writeln!(out, "▶ run {} (thread {})", e.run_id, e.thread_id)?;
            }
            Event::TextMessageStart(e) => {
                self.line(out)?;
                let role = e.role.map_or("assistant", |r| r.as_str());
                write!(out, "{role}: ")?;
                self.mid_line = true;
            }
            Event::TextMessageContent(e) => {
                write!(out, "{}", e.delta)?;
                self.mid_line = true;
            }
            Event::TextMessageEnd(_) | Event::ReasoningMessageEnd(_) => self.line(out)?,
            Event::ReasoningMessageStart(_) => {
                self.line(out)?;
                write!(out, "  (thinking) ")?;
                self.mid_line = true;
            }
            Event::ReasoningMessageContent(e) => {
                write!(out, "{}", e.delta)?;
                self.mid_line = true;
            }
            Event::ToolCallStart(e) => {
                self.line(out)?;
                write!(out, "→ {}(", e.tool_call_name)?;
                self.mid_line = true;
            }
            Event::ToolCallArgs(e) => write!(out, "{}", e.delta)?,
            Event::ToolCallEnd(_) => {
                writeln!(out, ")")?;
                self.mid_line = false;
            }
            Event::ToolCallResult(e) => {
                self.line(out)?;
                let text = match &e.content {
                    Content::Text(text) => text.clone(),
                    parts => serde_json::to_string(parts).unwrap_or_default(),
                };
                writeln!(out, "  ↳ {text}")?;
            }
            Event::StateSnapshot(e) => {
                self.line(out)?;
                writeln!(out, "state = {}", e.snapshot)?;
            }
            Event::StateDelta(e) => {
                self.line(out)?;
                let ops = serde_json::to_string(&e.delta).unwrap_or_default();
                writeln!(out, "state Δ {ops}")?;
            }
            Event::MessagesSnapshot(e) => {
                self.line(out)?;
                writeln!(out, "messages = {} messages", e.messages.len())?;
            }
            Event::StepStarted(e) => {
                self.line(out)?;
                writeln!(out, "── {} ──", e.step_name)?;
            }
            Event::StepFinished(e) => {
                self.line(out)?;
                writeln!(out, "── {} done ──", e.step_name)?;
            }
            Event::SubagentStarted(e) => {
                self.line(out)?;
                writeln!(out, "⤷ subagent {}", e.name)?;
            }
            Event::SubagentFinished(_) => {
                self.line(out)?;
                writeln!(out, "⤶ subagent done")?;
            }
            Event::SubagentError(e) => {
                self.line(out)?;
                writeln!(out, "⤶ subagent failed: {}", e.message)?;
            }
            Event::Custom(e) => {
                self.line(out)?;
                writeln!(out, "custom {}: {}", e.name, e.value)?;
            }
            Event::ActivitySnapshot(e) => {
                self.line(out)?;
                writeln!(
                    out,
                    "activity {} {}",
                    e.activity_type,
                    serde_json::Value::Object(e.content.clone())
                )?;
            }
            Event::RunFinished(e) => {
                self.line(out)?;
                match &e.outcome {
                    Some(RunFinishedOutcome::Interrupt { interrupts }) => {
                        writeln!(out, "⏸ interrupted")?;
                        for i in interrupts {
                            let message = i.message.as_deref().unwrap_or("");
                            writeln!(out, "  interrupt {} ({}): {message}", i.id, i.reason)?;
                        }
                    }
                    Some(RunFinishedOutcome::Cancelled) => writeln!(out, "■ cancelled")?,
                    Some(RunFinishedOutcome::Success {
                        pending_tool_call_ids: Some(ids),
                    }) if !ids.is_empty() => {
                        writeln!(
                            out,
                            "✔ finished; waiting for tool results: {}",
                            ids.join(", ")
                        )?;
                    }
                    _ => writeln!(out, "✔ finished")?,
                }
                if let Some(result) = &e.result {
                    writeln!(out, "  result: {result}")?;
                }
            }
            Event::RunError(e) => {
                self.line(out)?;
                match &e.code {
                    Some(code) => writeln!(out, "✘ error: {} ({code})", e.message)?,
                    None => writeln!(out, "✘ error: {}", e.message)?,
                }
            }
            // Spans, deltas and raw events add nothing readable.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_a_run_readably() {
        let events = [
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "STEP_STARTED", "stepName": "lookup"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "get_weather"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{\"city\":"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "\"Lisbon\"}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c"}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "m0", "toolCallId": "c", "content": "21 °C"}),
            json!({"type": "STEP_FINISHED", "stepName": "lookup"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "It is "}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "sunny."}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
            json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/city", "value": "Lisbon"}]}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "confirmation", "message": "OK?"}]}}),
        ];
        let mut renderer = Renderer::default();
        let mut out = Vec::new();
        for e in events {
            renderer
                .event(&Event::from_value(e).unwrap().value, &mut out)
                .unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "▶ run r (thread t)\n── lookup ──\n→ get_weather({\"city\":\"Lisbon\"})\n  ↳ 21 °C\n── lookup done ──\nassistant: It is sunny.\nstate Δ [{\"op\":\"add\",\"path\":\"/city\",\"value\":\"Lisbon\"}]\n⏸ interrupted\n  interrupt i1 (confirmation): OK?\n"
        );
    }
}
