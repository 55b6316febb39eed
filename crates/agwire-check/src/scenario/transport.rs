//! The scenarios about the transport: an aborted run, malformed input,
//! `Accept` negotiation, `Last-Event-ID` resumption, capabilities.

use std::time::{Duration, Instant};

use agwire_codec::negotiate::{PROTO_CONTENT_TYPE, SSE_CONTENT_TYPE};
use agwire_core::AgentCapabilities;
use agwire_core::decode::{DecodeMode, decode};
use serde_json::{Value, json};

use super::{Kept, Runner, Scene, accept_of, body_of, describe, partial_events, user};
use crate::Error;
use crate::exchange::{Ask, Wire};
use crate::family::Family;
use crate::report::{Finding, Severity};

impl Runner<'_> {
    pub(super) async fn cancel(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let input = self.input(
            None,
            vec![user(
                "Write a long story about a lighthouse keeper, at least 400 words.",
            )],
        );
        let ask = Ask {
            body: Some(body_of(&input)),
            url: self.check.url.clone(),
            accept: Some(accept_of(self.wire).to_owned()),
            last_event_id: None,
            abort_after_first_bytes: true,
        };
        let aborted = self
            .send(scene, "run, aborted after its first bytes", &ask)
            .await?;
        if !aborted.is_success() {
            self.answered_with_stream(scene, "run", &aborted, Family::RunInput);
            return Ok(());
        }
        let seen = partial_events(self.wire, &aborted);
        if let Some(report) = scene.exchanges.last_mut() {
            report.events = seen.len();
        }
        if aborted.complete
            || seen
                .iter()
                .any(|e| matches!(e["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR")))
        {
            scene.skip("the run ended before the client could abort it");
            return Ok(());
        }
        self.exercised.insert(Family::Cancellation);
        // The thread must take a new run: at once from a server that stopped
        // the aborted one, within the timeout from one that lets it finish.
        let aborted_at = Instant::now();
        let deadline = aborted_at + self.check.timeout;
        let mut refusals = 0u32;
        let mut backoff = Duration::from_millis(50);
        loop {
            let next = self.input(Some(&input.thread_id), vec![user("Say hello.")]);
            let ask = Ask {
                body: Some(body_of(&next)),
                url: self.check.url.clone(),
                accept: Some(accept_of(self.wire).to_owned()),
                last_event_id: None,
                abort_after_first_bytes: false,
            };
            let label = "next run on the thread";
            let exchange = self.send(scene, label, &ask).await?;
            let busy = matches!(exchange.status, Some(409 | 423 | 429 | 503));
            if busy && Instant::now() + backoff < deadline {
                refusals += 1;
                // Only the answer that counts stays in the report.
                scene.exchanges.pop();
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
            if busy {
                scene.violation(
                    Family::Cancellation,
                    label,
                    format!(
                        "after the client aborted, the thread still refused new runs {:.1} s later ({refusals} refusals; last: {} {}): the aborted run did not stop",
                        aborted_at.elapsed().as_secs_f64(),
                        exchange.status.unwrap_or(0),
                        exchange.body_text()
                    ),
                );
                return Ok(());
            }
            if self.answered_with_stream(scene, label, &exchange, Family::Cancellation) {
                let judged = self.judge(scene, label, &next, &exchange, self.wire);
                scene.note = Some(format!(
                    "aborted after {} event(s); the thread took a new run after {:.0} ms ({refusals} refusal(s)): {}",
                    seen.len(),
                    aborted_at.elapsed().as_secs_f64() * 1000.0,
                    describe(&judged)
                ));
            }
            return Ok(());
        }
    }

    pub(super) async fn bad_input(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let valid = self.input(None, vec![user("Hello!")]);
        let mut wrong_type = serde_json::to_value(&valid).unwrap_or_default();
        wrong_type["messages"] = json!("hello");
        let cases: [(&str, Vec<u8>); 3] = [
            ("a body that is not JSON", b"{\"threadId\": ".to_vec()),
            (
                "a RunAgentInput without threadId and runId",
                br#"{"messages":[],"tools":[],"context":[],"state":{},"forwardedProps":{}}"#
                    .to_vec(),
            ),
            (
                "messages that are a string",
                serde_json::to_vec(&wrong_type).unwrap_or_default(),
            ),
        ];
        for (what, body) in cases {
            let ask = Ask {
                body: Some(body),
                url: self.check.url.clone(),
                accept: Some(accept_of(self.wire).to_owned()),
                last_event_id: None,
                abort_after_first_bytes: false,
            };
            let exchange = self.send(scene, what, &ask).await?;
            match exchange.status {
                Some(status) if (400..500).contains(&status) => {}
                Some(status) if (200..300).contains(&status) => scene.violation(
                    Family::RunInput,
                    what,
                    format!(
                        "{what} was accepted with {status} ({}): a malformed RunAgentInput is refused with a 4xx before any stream",
                        exchange.content_type.as_deref().unwrap_or("no content type")
                    ),
                ),
                Some(status) => scene.violation(
                    Family::RunInput,
                    what,
                    format!(
                        "{what} got {status}: a malformed RunAgentInput is the client's error, answered with a 4xx ({})",
                        exchange.body_text()
                    ),
                ),
                None => scene.violation(
                    Family::RunInput,
                    what,
                    format!(
                        "{what} got no answer ({}): a malformed RunAgentInput is answered with a 4xx",
                        exchange.error.as_deref().unwrap_or("unknown")
                    ),
                ),
            }
        }
        self.exercised.insert(Family::RunInput);
        Ok(())
    }

    pub(super) async fn negotiation(&mut self, scene: &mut Scene) -> Result<(), Error> {
        self.exercised.insert(Family::Negotiation);
        let mut notes = Vec::new();
        for (accept, asked) in [
            ("application/json", Wire::Sse),
            (PROTO_CONTENT_TYPE, Wire::Proto),
            (SSE_CONTENT_TYPE, Wire::Sse),
        ] {
            let input = self.input(
                None,
                vec![user("Hello! Please answer with one short sentence.")],
            );
            let ask = Ask {
                body: Some(body_of(&input)),
                url: self.check.url.clone(),
                accept: Some(accept.to_owned()),
                last_event_id: None,
                abort_after_first_bytes: false,
            };
            let label = format!("Accept: {accept}");
            let exchange = self.send(scene, &label, &ask).await?;
            if !exchange.is_success() {
                let status = exchange
                    .status
                    .map_or("no answer".to_owned(), |s| s.to_string());
                scene.violation(
                    Family::Negotiation,
                    &label,
                    format!(
                        "Accept: {accept} got {status} ({}): a producer answers SSE whenever Accept does not admit protobuf, and clients MUST always be ready for SSE",
                        exchange.body_text()
                    ),
                );
                continue;
            }
            let judged = self.judge(scene, &label, &input, &exchange, asked);
            let answered = match judged.wire {
                Some(Wire::Proto) => "protobuf",
                _ => "SSE",
            };
            if accept == PROTO_CONTENT_TYPE {
                self.features.protobuf = Some(judged.wire == Some(Wire::Proto));
            }
            notes.push(format!("{accept} → {answered}"));
        }
        scene.note = Some(notes.join("; "));
        Ok(())
    }

    pub(super) async fn resume(&mut self, scene: &mut Scene) -> Result<(), Error> {
        if self.wire == Wire::Proto {
            scene.skip("protobuf frames carry no event ids");
            return Ok(());
        }
        let kept = match self.kept.take() {
            Some(kept) => kept,
            None => {
                let input = self.input(
                    None,
                    vec![user("Hello! Please answer with one short sentence.")],
                );
                let Some((exchange, judged)) = self.run_input(scene, "run", &input).await? else {
                    return Ok(());
                };
                Kept {
                    input,
                    exchange,
                    judged,
                }
            }
        };
        let events = &kept.judged.events;
        let ids = &kept.judged.ids;
        if kept.judged.wire != Some(Wire::Sse) || !ids.iter().any(Option::is_some) {
            scene.skip("the stream's frames carry no id: (resumption is optional)");
            return Ok(());
        }
        if kept.judged.rejected || events.len() < 2 {
            scene.skip("no complete stream to resume");
            return Ok(());
        }
        // The middle event that has an id.
        let Some(k) = (0..events.len() - 1)
            .rev()
            .filter(|&i| ids[i].is_some())
            .find(|&i| i <= events.len() / 2)
            .or_else(|| (0..events.len() - 1).find(|&i| ids[i].is_some()))
        else {
            scene.skip("no event before the last carries an id");
            return Ok(());
        };
        let last_id = ids[k].clone().unwrap_or_default();
        let (url, body) = match &kept.exchange.location {
            Some(location) => (location.clone(), None),
            None => (self.check.url.clone(), Some(body_of(&kept.input))),
        };
        let ask = Ask {
            body,
            url,
            accept: Some(SSE_CONTENT_TYPE.to_owned()),
            last_event_id: Some(last_id.clone()),
            abort_after_first_bytes: false,
        };
        let label = "resume";
        let exchange = self.send(scene, label, &ask).await?;
        self.exercised.insert(Family::Resumption);
        if !exchange.is_success() {
            scene.violation(
                Family::Resumption,
                label,
                format!(
                    "resuming after id '{last_id}' got {} ({}): a stream whose frames carry ids resumes from Last-Event-ID",
                    exchange.status.map_or("no answer".to_owned(), |s| s.to_string()),
                    exchange.body_text()
                ),
            );
            return Ok(());
        }
        let got = partial_events(Wire::Sse, &exchange);
        if let Some(report) = scene.exchanges.last_mut() {
            report.events = got.len();
        }
        let expected = &events[k + 1..];
        let before = &events[..=k];
        let verdict = if got == expected {
            None
        } else if let Some((i, repeated)) = got.iter().enumerate().find(|(_, e)| before.contains(e))
        {
            Some((
                Some(i),
                format!(
                    "the resumed stream repeats an event the client already had (#{} of the original stream) at position {i}: Last-Event-ID '{last_id}' must give exactly the events after it",
                    before.iter().position(|e| e == repeated).unwrap_or(0)
                ),
            ))
        } else if got.len() < expected.len() && expected.starts_with(&got) {
            Some((
                None,
                format!(
                    "the resumed stream ends after {} of the {} remaining events",
                    got.len(),
                    expected.len()
                ),
            ))
        } else {
            let i = got
                .iter()
                .zip(expected)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(expected.len()));
            Some((
                Some(i),
                format!(
                    "the resumed stream differs from the rest of the original at position {i} ({} events resumed, {} expected)",
                    got.len(),
                    expected.len()
                ),
            ))
        };
        match verdict {
            None => {
                scene.note = Some(format!(
                    "resumed after event #{k} (id '{last_id}') {}: exactly the {} remaining events",
                    if kept.exchange.location.is_some() {
                        "at the Location"
                    } else {
                        "by posting again"
                    },
                    expected.len()
                ));
            }
            Some((index, message)) => scene.findings.push(Finding {
                severity: Severity::Violation,
                family: Family::Resumption,
                rule: Family::Resumption.spec(),
                scenario: scene.scenario.name().to_owned(),
                exchange: label.to_owned(),
                event_index: index,
                event: index.and_then(|i| got.get(i).cloned()),
                message,
            }),
        }
        Ok(())
    }

    pub(super) async fn capabilities(&mut self, scene: &mut Scene) -> Result<(), Error> {
        let Some(url) = self.check.capabilities.clone() else {
            scene.skip(
                "AG-UI 1.1 leaves where capabilities are published to the server: give --capabilities URL",
            );
            return Ok(());
        };
        let ask = Ask {
            body: None,
            url,
            accept: Some("application/json".to_owned()),
            last_event_id: None,
            abort_after_first_bytes: false,
        };
        let label = "GET capabilities";
        let exchange = self.send(scene, label, &ask).await?;
        self.exercised.insert(Family::Capabilities);
        if !exchange.is_success() {
            scene.violation(
                Family::Capabilities,
                label,
                format!(
                    "the capabilities document answered {}",
                    exchange
                        .status
                        .map_or("nothing".to_owned(), |s| s.to_string())
                ),
            );
            return Ok(());
        }
        let value: Value = match serde_json::from_slice(&exchange.body) {
            Ok(value) => value,
            Err(error) => {
                scene.violation(Family::Capabilities, label, format!("not JSON: {error}"));
                return Ok(());
            }
        };
        match decode::<AgentCapabilities>(value, DecodeMode::Strict) {
            Ok(_) => scene.note = Some("a valid AgentCapabilities document".to_owned()),
            Err(error) => scene.violation(
                Family::Capabilities,
                label,
                format!("not an AgentCapabilities document of the 1.1 schema: {error}"),
            ),
        }
        Ok(())
    }
}
