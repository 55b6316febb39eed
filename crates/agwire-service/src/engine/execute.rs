//! Executing a claimed run: its agent's events appended to the log as they
//! come (a batch per transaction), published live only once written, and
//! its end — status, output for the thread, terminal event — in one write.

use agwire_core::{Event, RunErrorEvent, RunFinishedOutcome};
use std::panic::AssertUnwindSafe;

use agwire_server::{CancellationToken, event_queue, run_detached};
use futures_util::FutureExt;
use serde_json::{Value, json};

use super::follow::is_terminal;
use super::hub::Producer;
use super::{Engine, now_ms};
use crate::brain::RunSetup;
use crate::run::RunStatus;
use crate::store::Ending;

/// Most events appended in one write (and queued between the agent and the
/// log: the agent waits while this many are not yet written).
const BATCH: usize = 64;

impl Engine {
    /// Runs the agent, appending its events to the log as they come and
    /// ending the run (status, output, terminal event) in one transaction.
    pub(super) async fn execute(
        &self,
        run: Box<crate::store::Claimed>,
        cancel: CancellationToken,
        live: &Producer,
    ) {
        let started = std::time::Instant::now();
        // (Boxed, as every await here that is not the run's own loop: a
        // future is as large as its largest state, and this one is held for
        // the whole run.)
        let setup = Box::pin(RunSetup::prepare(&self.store, &self.runtime, &run)).await;
        // What it read from the store is the setup's now: the claim's box
        // and the rest of it are freed here, not held while the run streams.
        let (task_id, input) = run.into_task();
        let task_id = task_id.as_str();
        let agent = match setup {
            Ok(setup) => self.brain.agent(setup),
            Err(error) => {
                tracing::error!(%error, "could not prepare the run");
                let (message, code) = match error {
                    // The images the user sent are in a bucket it could not
                    // read: said, not answered without them.
                    crate::Error::Store(crate::StoreError::Blobs(_)) => (
                        "the run's images could not be read: attachment storage is unavailable",
                        "attachment_storage_unavailable",
                    ),
                    _ => ("the run could not be prepared", "internal"),
                };
                let failure = Event::RunError(RunErrorEvent::new(message).code(code));
                Box::pin(self.end(task_id, Vec::new(), &failure, &[], live, started)).await;
                return;
            }
        };
        let (tx, rx) = event_queue(BATCH);
        // The agent runs beside the loop that writes its events, in this
        // task: a run is one task, and an event batch wakes nothing else. A
        // panic outside the agent's own code (caught by `run_detached`)
        // still ends the run below.
        let produce = AssertUnwindSafe(run_detached(&*agent, input, tx, cancel)).catch_unwind();
        // What the run says, folded into the thread's messages at its end.
        let mut output = agwire_core::apply::Session::new(Vec::new(), json!({}));
        // The trace a user's report finds the run by, on its RUN_STARTED.
        let mut trace = self.telemetry.run_started_metadata();
        let consume = async {
            let mut rx = rx;
            // Events that are ready together are appended in one
            // transaction (the buffer grows to what the run writes at once).
            let mut batch: Vec<Event> = Vec::new();
            while rx.recv_many(&mut batch, BATCH).await > 0 {
                let mut events = std::mem::take(&mut batch);
                if let Some(trace) = trace.take() {
                    stamp_trace(&mut events, trace);
                }
                let terminal = events.iter().position(is_terminal);
                let rest = terminal.map(|i| events.split_off(i)).unwrap_or_default();
                for event in &events {
                    output.apply(event);
                }
                // The batch that ends the run is one write with its end.
                if let Some(end) = rest.into_iter().next() {
                    return Box::pin(self.end(
                        task_id,
                        events,
                        &end,
                        &output.messages,
                        live,
                        started,
                    ))
                    .await;
                }
                if !events.is_empty()
                    && !Box::pin(self.append_and_publish(task_id, events, live)).await
                {
                    return false;
                }
            }
            false
            // (Dropping `rx` here: an agent still sending is refused.)
        };
        let (_, ended) = tokio::join!(produce, consume);
        if !ended {
            // The log refused events, or the agent vanished without an end:
            // the run still ends, with what it said so far.
            let failure = Event::RunError(
                RunErrorEvent::new("the run could not be recorded").code("internal"),
            );
            Box::pin(self.end(
                task_id,
                Vec::new(),
                &failure,
                &output.messages,
                live,
                started,
            ))
            .await;
        }
    }

    /// Writes a run's end, its last `events` first; true when this call
    /// ended it.
    pub(super) async fn end(
        &self,
        task_id: &str,
        events: Vec<Event>,
        terminal: &Event,
        said: &[agwire_core::Message],
        live: &Producer,
        started: std::time::Instant,
    ) -> bool {
        // The approvals it leaves expire this long after its end; an
        // interrupt asking for one says when (AG-UI's `expiresAt`). One
        // reading of the clock for both, so a call's `expiresAt` is exactly
        // the TTL after its `askedAt` (the end's time).
        let ended_at = now_ms();
        let calls_expire_at = ended_at
            .saturating_add(i64::try_from(self.tool_call_ttl.as_millis()).unwrap_or(i64::MAX));
        let stated = with_expiry(terminal, calls_expire_at);
        let terminal = stated.as_ref().unwrap_or(terminal);
        let (status, error, usage) = match terminal {
            Event::RunFinished(e) => (
                match e.outcome {
                    Some(RunFinishedOutcome::Interrupt { .. }) => RunStatus::Interrupted,
                    Some(RunFinishedOutcome::Cancelled) => RunStatus::Cancelled,
                    _ => RunStatus::Succeeded,
                },
                None,
                e.usage.as_ref(),
            ),
            Event::RunError(e) => (
                RunStatus::Failed,
                Some(json!({"message": e.message, "code": e.code})),
                e.usage.as_ref(),
            ),
            _ => return false,
        };
        // One line per run for the operator (its ids are on the span).
        tracing::info!(
            status = %status,
            ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            input_tokens = tokens(usage, |u| u.input_tokens),
            output_tokens = tokens(usage, |u| u.output_tokens),
            "run ended"
        );
        // Counted only while there is a quota to count them for: without
        // one, a run's end writes nothing more.
        let tokens = match (usage, self.quotas.tokens_per_day) {
            (Some(entries), Some(_)) => agwire_store::run_tokens(entries),
            _ => 0,
        };
        let usage = usage.and_then(|u| serde_json::to_value(u).ok());
        // Tool messages too: the runtime needs them; history never shows them.
        let output: Vec<agwire_core::Message> = said
            .iter()
            .filter(|m| {
                matches!(
                    m,
                    agwire_core::Message::Assistant(_) | agwire_core::Message::Tool(_)
                )
            })
            .cloned()
            .collect();
        // The turn's UI streamed as an `ui_schema` activity; the last one is
        // what history shows under the answer.
        let ui_schema = said.iter().rev().find_map(|m| match m {
            agwire_core::Message::Activity(a) if a.activity_type == "ui_schema" => {
                Some(Value::Object(a.content.clone()))
            }
            _ => None,
        });
        let ending = Ending {
            status,
            error: error.as_ref(),
            usage: usage.as_ref(),
            events: &events,
            terminal,
            output: &output,
            ui_schema: ui_schema.as_ref(),
            calls_expire_at: Some(calls_expire_at),
            tokens,
        };
        let started = std::time::Instant::now();
        let ended = self.store.end_run(task_id, &ending, ended_at).await;
        self.telemetry
            .store_write("end_run", self.store.database(), started);
        // The run's span (current while it executes) says how it ended.
        let span = tracing::Span::current();
        span.record("ag_ui.run.outcome", status.as_str());
        if let Event::RunError(e) = terminal {
            span.record("otel.status_code", "error");
            span.record("otel.status_description", e.message.as_str());
        }
        match ended {
            Ok(Some(seq)) => {
                span.record(
                    "ag_ui.run.event_count",
                    i64::try_from(seq).unwrap_or(i64::MAX),
                );
                self.metrics.appended(events.len() + 1, started.elapsed());
                let first = seq - events.len() as u64;
                for (i, event) in events.into_iter().enumerate() {
                    live.publish(first + i as u64, event);
                }
                live.publish(seq, terminal.clone());
                true
            }
            Ok(None) => false,
            Err(error) => {
                tracing::error!(%error, "could not end run");
                false
            }
        }
    }

    /// Appends events to the log, then (only then) publishes them. False
    /// when the log could not take them: the run then fails.
    pub(super) async fn append_and_publish(
        &self,
        task_id: &str,
        events: Vec<Event>,
        live: &Producer,
    ) -> bool {
        let started = std::time::Instant::now();
        let appended = self.store.append_events(task_id, &events).await;
        self.telemetry
            .store_write("append_events", self.store.database(), started);
        match appended {
            Ok(first) => {
                self.metrics.appended(events.len(), started.elapsed());
                for (i, event) in events.into_iter().enumerate() {
                    live.publish(first + i as u64, event);
                }
                true
            }
            Err(error) => {
                tracing::error!(%error, "could not append events; the run fails");
                false
            }
        }
    }
}

/// `trace` into the metadata of the batch's `RUN_STARTED` (the run's
/// first event), beside what the agent put there.
fn stamp_trace(events: &mut [Event], trace: serde_json::Map<String, Value>) {
    if let Some(Event::RunStarted(started)) = events.first_mut() {
        let metadata = started.base.metadata.get_or_insert_with(Default::default);
        for (key, value) in trace {
            metadata.entry(key).or_insert(value);
        }
    }
}

/// A token count summed over a run's usage entries (one per model).
fn tokens(
    usage: Option<&Vec<agwire_core::TokenUsage>>,
    count: impl Fn(&agwire_core::TokenUsage) -> Option<u64>,
) -> u64 {
    usage.map_or(0, |entries| entries.iter().filter_map(count).sum())
}

/// `terminal` with `expiresAt` (RFC 3339, `expires_at_ms`) on each of its
/// interrupts that asks for a tool call's answer and states no expiry of
/// its own; `None` when there is none to state.
fn with_expiry(terminal: &Event, expires_at_ms: i64) -> Option<Event> {
    let Event::RunFinished(finished) = terminal else {
        return None;
    };
    let Some(RunFinishedOutcome::Interrupt { interrupts }) = &finished.outcome else {
        return None;
    };
    let unstated = |i: &agwire_core::Interrupt| i.tool_call_id.is_some() && i.expires_at.is_none();
    if !interrupts.iter().any(unstated) {
        return None;
    }
    let at = jiff::Timestamp::from_millisecond(expires_at_ms)
        .ok()?
        .to_string();
    let mut finished = finished.clone();
    if let Some(RunFinishedOutcome::Interrupt { interrupts }) = &mut finished.outcome {
        for interrupt in interrupts.iter_mut().filter(|i| unstated(i)) {
            interrupt.expires_at = Some(at.clone());
        }
    }
    Some(Event::RunFinished(finished))
}
