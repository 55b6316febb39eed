//! The scenarios about the conversation: a text turn, history, frontend
//! tools answered and continued, state, interrupts resumed.

use std::collections::BTreeSet;

use agwire_core::apply::RunEnd;
use agwire_core::{Message, ResumeEntry, ResumeStatus, RunFinishedOutcome};
use serde_json::json;

use super::{Kept, Runner, Scene, confirm_tool, describe, message, new_id, short, user};
use crate::Error;
use crate::family::Family;

impl Runner<'_> {
    pub(super) async fn text(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let input = self.input(
            None,
            vec![user("Hello! Please answer with one short sentence.")],
        );
        if let Some((exchange, judged)) = self.run_input(scene, "run", &input).await? {
            scene.note = Some(describe(&judged));
            self.kept = Some(Kept {
                input,
                exchange,
                judged,
            });
        }
        Ok(())
    }

    pub(super) async fn history(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let messages = vec![
            user("My name is Ada."),
            message(
                json!({"id": new_id("assistant"), "role": "assistant", "content": "Nice to meet you, Ada!"}),
            ),
            user("What is my name? Answer in one short sentence."),
        ];
        let input = self.input(None, messages);
        if let Some((_, judged)) = self.run_input(scene, "run", &input).await? {
            scene.note = Some(describe(&judged));
        }
        Ok(())
    }

    pub(super) async fn frontend_tools(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let mut input = self.input(
            None,
            vec![user(
                "Please call the confirm_action tool with action \"archive the report\", then wait for my answer.",
            )],
        );
        input.tools = vec![confirm_tool()];
        let Some((_, judged)) = self.run_input(scene, "run", &input).await? else {
            return Ok(());
        };
        // Calls of the offered tool that no tool message answered.
        let answered: BTreeSet<&str> = judged
            .session
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some(t.tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        let pending: Vec<String> = judged
            .session
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Assistant(a) => a.tool_calls.as_ref(),
                _ => None,
            })
            .flatten()
            .filter(|c| c.function.name == "confirm_action" && !answered.contains(c.id.as_str()))
            .map(|c| c.id.clone())
            .collect();
        if pending.is_empty() {
            scene.skip("the agent called no frontend tool");
            return Ok(());
        }
        if let Some(RunEnd::Finished {
            outcome: RunFinishedOutcome::Interrupt { .. },
            ..
        }) = &judged.session.last_run
        {
            scene.violation(
                Family::ToolCalls,
                "run",
                "a run that hands frontend tool calls to the client ends as success (with pendingToolCallIds), never as an interrupt".to_owned(),
            );
        }
        self.exercised.insert(Family::ToolCalls);
        let mut messages = judged.session.messages.clone();
        for id in &pending {
            messages.push(message(json!({
                "id": new_id("tool"),
                "role": "tool",
                "toolCallId": id,
                "content": "{\"confirmed\":true}"
            })));
        }
        let follow = self.input(Some(&input.thread_id), messages);
        let mut follow = follow;
        follow.tools = vec![confirm_tool()];
        if let Some((_, judged)) = self
            .run_input_of(
                scene,
                "follow-up with the tool's answer",
                &follow,
                Family::ToolCalls,
            )
            .await?
        {
            scene.note = Some(format!(
                "{} call(s) of confirm_action answered; follow-up: {}",
                pending.len(),
                describe(&judged)
            ));
        }
        Ok(())
    }

    pub(super) async fn state(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let mut input = self.input(
            None,
            vec![user(
                "Add the item \"b\" to the shared state's items and increase count by one.",
            )],
        );
        input.state = Some(json!({"count": 1, "items": ["a"], "checkedBy": "agwire check"}));
        if let Some((_, judged)) = self.run_input(scene, "run", &input).await? {
            if judged.has_type("STATE_") {
                scene.note = Some(format!(
                    "{} state event(s) applied; final state {}",
                    judged
                        .events
                        .iter()
                        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("STATE_")))
                        .count(),
                    short(&judged.session.state.to_string())
                ));
            } else {
                scene.skip("the agent sent no STATE_SNAPSHOT or STATE_DELTA");
            }
        }
        Ok(())
    }

    pub(super) async fn interrupt(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let input = self.input(
            None,
            vec![user(
                "Send an email to the team saying the report is ready, but ask me for approval first.",
            )],
        );
        let Some((_, judged)) = self.run_input(scene, "run", &input).await? else {
            return Ok(());
        };
        let interrupts = judged.session.pending_interrupts.clone();
        if interrupts.is_empty() {
            scene.skip("the run did not end with an interrupt");
            return Ok(());
        }
        self.exercised.insert(Family::Interrupts);
        let mut follow = self.input(Some(&input.thread_id), judged.session.messages.clone());
        follow.resume = Some(
            interrupts
                .iter()
                .map(|i| ResumeEntry {
                    interrupt_id: i.id.clone(),
                    status: ResumeStatus::Cancelled,
                    payload: None,
                    metadata: None,
                })
                .collect(),
        );
        if let Some((_, judged)) = self
            .run_input_of(scene, "resume (cancelled)", &follow, Family::Interrupts)
            .await?
        {
            scene.note = Some(format!(
                "{} interrupt(s) resumed as cancelled; resume run: {}",
                interrupts.len(),
                describe(&judged)
            ));
        }
        Ok(())
    }
}
